//! Terminal-safe text: untrusted strings (payloads, node ids, file names, HTTP bodies) never reach a
//! terminal raw. Control characters (C0, DEL, C1) and bidi/invisible format characters are shown as
//! visible escapes, so no byte can move the cursor, change colours or set the window title.

use std::borrow::Cow;

/// True for a character that must not reach a terminal raw: a control character (C0, DEL, C1)
/// or a bidi/invisible formatting character.
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || is_bidi_control(c)
        || matches!(c,
            '\u{200b}'..='\u{200d}' | '\u{2028}'..='\u{2029}' | '\u{2060}'..='\u{2065}' | '\u{feff}')
}

/// True for a bidirectional formatting character, which reorders what a terminal shows: the
/// marks (U+061C ARABIC LETTER MARK, U+200E, U+200F), the embeddings and overrides
/// (U+202A-U+202E) and the isolates (U+2066-U+2069). The one list: [`needs_escape`] escapes
/// them, and the tenant id rule refuses them.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Untrusted text (stored rows, file contents, request bodies) on its way to a terminal: its
/// `Display` escapes by construction (see [`visible`]) and honours width and alignment, so a format
/// string cannot print the raw text by forgetting a call.
#[derive(Debug, Clone, Copy)]
pub struct Untrusted<'a>(pub &'a str);

impl std::fmt::Display for Untrusted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(&visible(self.0))
    }
}

/// Wraps untrusted text for display.
pub fn untrusted(s: &str) -> Untrusted<'_> {
    Untrusted(s)
}

/// `s` with every control or invisible formatting character replaced by a visible escape
/// (`\n`, `\t`, `\r`, `\x1b`, `\u{202e}`, ...).
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x100 && needs_escape(c) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `s` with the password of every URL's userinfo in it replaced by `***`
/// (`http://user:secret@host/x` -> `http://user:***@host/x`): for a URL shown or logged (a webhook
/// target, a NATS server), or a message quoting one (an HTTP client's error names its URL). The
/// user name stays, so the target can still be told apart; nothing else changes.
pub fn hide_url_passwords(s: &str) -> Cow<'_, str> {
    if !s.contains("://") || !s.contains('@') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // The URL as a word of the text; its authority ends at the first `/`, `?` or `#`, unless
        // an `@` comes later in the word after a `user:` part: a password holding one of those
        // (not percent-encoded, `http://u:se/cret@h`) is masked whole, never cut at it.
        let word = tail
            .find(|c: char| ",)\"'<>".contains(c) || c.is_whitespace())
            .unwrap_or(tail.len());
        let end = match tail[..word].rfind('@') {
            Some(at) if tail[..at].contains(':') => {
                at + tail[at..word].find(['/', '?', '#']).unwrap_or(word - at)
            }
            _ => tail[..word].find(['/', '?', '#']).unwrap_or(word),
        };
        let authority = &tail[..end];
        match authority.rfind('@').map(|at| authority.split_at(at)) {
            Some((userinfo, host)) => {
                match userinfo.split_once(':') {
                    Some((user, _)) => {
                        out.push_str(user);
                        out.push_str(":***");
                    }
                    None => out.push_str(userinfo),
                }
                out.push_str(host);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Like [`visible`] but also keeps line breaks (each line made safe on its own), for multi-line
/// views such as a pretty-printed payload.
pub fn visible_lines(s: &str) -> Vec<String> {
    s.split('\n').map(|l| visible(l).into_owned()).collect()
}

/// Makes bytes that may not be UTF-8 safe to show: valid text as [`visible`] shows it, every byte
/// of an invalid sequence as `\xNN` (not U+FFFD: two different names must not look the same).
pub fn visible_bytes(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        out.push_str(&visible(chunk.valid()));
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

/// Bytes received (an HTTP error body) as text to keep: valid UTF-8 as it is, every byte of an
/// invalid sequence as `\xNN` (not U+FFFD, which would hide what the peer sent). Not for a terminal
/// as it is: show it through [`visible`], which escapes its control characters.
pub fn bytes_as_text(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        out.push_str(chunk.valid());
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

/// A file name or path for a terminal or a message: [`visible_bytes`] of its bytes (a name that is
/// not UTF-8 shows its bytes, not U+FFFD).
pub fn visible_path(p: &std::path::Path) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        visible_bytes(p.as_os_str().as_bytes())
    }
    #[cfg(not(unix))]
    {
        visible(&p.display().to_string()).into_owned()
    }
}

/// A path on its way to a message or a line of output: its `Display` is [`visible_path`] (every
/// control or formatting character, and every byte that is not UTF-8, as a visible escape) and
/// honours width and alignment. `Path::display` prints control characters raw and bytes that are
/// not UTF-8 as U+FFFD (two different names then look the same); a message that names a path
/// formats this instead (`path.shown()`, see [`ShowPath`]), so no format string can print the raw
/// name by forgetting a call.
#[derive(Debug, Clone, Copy)]
pub struct ShownPath<'a>(pub &'a std::path::Path);

impl std::fmt::Display for ShownPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(&visible_path(self.0))
    }
}

/// `path.shown()`: the path as a message shows it ([`ShownPath`]), where `path.display()` would
/// show it raw.
pub trait ShowPath {
    fn shown(&self) -> ShownPath<'_>;
}

impl ShowPath for std::path::Path {
    fn shown(&self) -> ShownPath<'_> {
        ShownPath(self)
    }
}

/// Serialises a path (serde `serialize_with`) as [`visible_path`] shows it: a name that is not
/// UTF-8 keeps its bytes as `\xNN` (never U+FFFD, never a serialisation error).
pub fn serialize_path<P, S>(p: &P, s: S) -> Result<S::Ok, S::Error>
where
    P: AsRef<std::path::Path>,
    S: serde::Serializer,
{
    s.serialize_str(&visible_path(p.as_ref()))
}

/// [`serialize_path`] for an optional path (`null` when there is none).
pub fn serialize_opt_path<P, S>(p: &Option<P>, s: S) -> Result<S::Ok, S::Error>
where
    P: AsRef<std::path::Path>,
    S: serde::Serializer,
{
    match p {
        Some(p) => serialize_path(p, s),
        None => s.serialize_none(),
    }
}

/// A path as one word to paste into a shell command a message suggests (`chmod 600 PATH`): as it
/// is when it holds only characters no shell treats specially, else ANSI-C quoted (`$'...'`, read
/// by bash, zsh, ksh and busybox sh) with every control or formatting character and every byte
/// that is not UTF-8 as `\xNN`, so the command names the very file and shows nothing raw.
pub fn shell_word(p: &std::path::Path) -> String {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        p.as_os_str().as_bytes()
    };
    #[cfg(not(unix))]
    let owned = p.display().to_string();
    #[cfg(not(unix))]
    let bytes = owned.as_bytes();
    let plain = |b: &u8| b.is_ascii_alphanumeric() || b"_./+-,:=@%".contains(b);
    if !bytes.is_empty() && bytes.iter().all(plain) {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut out = String::from("$'");
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\'' => out.push_str("\\'"),
                c if needs_escape(c) => {
                    for b in c.to_string().bytes() {
                        out.push_str(&format!("\\x{b:02x}"));
                    }
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('\'');
    out
}

/// An error and its causes, `outer: cause: root cause`, each said once (an HTTP client's own text
/// is often only "error sending request"; the reason, e.g. "Connection refused", is a source).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !part.is_empty() && !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_that_are_not_utf8_show_as_hex_not_as_replacement_characters() {
        assert_eq!(visible_bytes(b"a\xff\xfeb\x1b"), "a\\xff\\xfeb\\x1b");
        assert_eq!(visible_bytes("é".as_bytes()), "é");
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let p = std::path::Path::new(std::ffi::OsStr::from_bytes(b"dir/x\xff\x07.json"));
            assert_eq!(visible_path(p), "dir/x\\xff\\x07.json");
            let q = std::path::Path::new(std::ffi::OsStr::from_bytes(b"dir/x\xfe\x07.json"));
            assert_ne!(visible_path(p), visible_path(q));
        }
    }

    #[cfg(unix)]
    #[test]
    fn paths_serialise_and_quote_losslessly() {
        use std::os::unix::ffi::OsStrExt;
        let p = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(b"d/k\xff\x1b.pem"));
        #[derive(serde::Serialize)]
        struct S {
            #[serde(serialize_with = "serialize_path")]
            a: std::path::PathBuf,
            #[serde(serialize_with = "serialize_opt_path")]
            b: Option<std::path::PathBuf>,
        }
        let v = serde_json::to_value(S {
            a: p.clone(),
            b: None,
        })
        .unwrap();
        assert_eq!(v, serde_json::json!({"a": "d/k\\xff\\x1b.pem", "b": null}));
        assert_eq!(shell_word(&p), "$'d/k\\xff\\x1b.pem'");
        assert_eq!(shell_word(std::path::Path::new("/a/b-1.pem")), "/a/b-1.pem");
        assert_eq!(
            shell_word(std::path::Path::new("it's a\\b\u{202e}é")),
            "$'it\\'s a\\\\b\\xe2\\x80\\xaeé'"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_shown_path_escapes_controls_and_bytes_that_are_not_utf8_and_pads() {
        use std::os::unix::ffi::OsStrExt;
        let p = std::path::Path::new(std::ffi::OsStr::from_bytes(b"d/a\x1b[2J\xff.json"));
        assert_eq!(p.shown().to_string(), "d/a\\x1b[2J\\xff.json");
        assert_eq!(
            format!("[{:<4}]", std::path::Path::new("ab").shown()),
            "[ab  ]"
        );
    }

    #[test]
    fn the_display_type_escapes_and_pads() {
        assert_eq!(format!("[{:<6}]", untrusted("a\u{1b}")), "[a\\x1b ]");
        assert_eq!(untrusted("ok").to_string(), "ok");
    }

    #[test]
    fn escapes_every_control_and_bidi_character() {
        assert_eq!(visible("plain"), "plain");
        assert_eq!(visible("a\x1b]0;pwned\x07b"), "a\\x1b]0;pwned\\x07b");
        assert_eq!(visible("x\ny\tz\r"), "x\\ny\\tz\\r");
        assert_eq!(visible("\u{9b}31m"), "\\x9b31m");
        assert_eq!(visible("abc\u{202e}def"), "abc\\u{202e}def");
        assert_eq!(visible("ben\u{61c}ch"), "ben\\u{61c}ch");
        for c in [
            '\u{200e}', '\u{200f}', '\u{2066}', '\u{2069}', '\u{200b}', '\u{feff}',
        ] {
            assert!(needs_escape(c), "{c:?}");
        }
        assert_eq!(visible("\x7f"), "\\x7f");
        for b in 0u8..0x20 {
            let s = (b as char).to_string();
            assert!(!visible(&s).chars().any(|c| c.is_control()));
        }
    }

    #[test]
    fn url_passwords_are_hidden_and_nothing_else_changes() {
        let cases = [
            (
                "http://user:pass@host:8/x?a=b",
                "http://user:***@host:8/x?a=b",
            ),
            ("https://u:p:q@h", "https://u:***@h"),
            ("http://user@host/", "http://user@host/"),
            (
                "nats://a:b@n1:4222,nats://c:d@n2",
                "nats://a:***@n1:4222,nats://c:***@n2",
            ),
            (
                "error sending request for url (http://u:s3cr3t@127.0.0.1:1/hook): refused",
                "error sending request for url (http://u:***@127.0.0.1:1/hook): refused",
            ),
            ("http://host/a@b", "http://host/a@b"),
            // A password holding a character that ends an authority (not percent-encoded).
            ("http://u:se/cret@h:9/x", "http://u:***@h:9/x"),
            (
                "url \"http://u:se?c#ret@h/x\": bad",
                "url \"http://u:***@h/x\": bad",
            ),
            ("no url here @ all", "no url here @ all"),
        ];
        for (given, shown) in cases {
            assert_eq!(hide_url_passwords(given), shown, "{given}");
        }
    }
}
