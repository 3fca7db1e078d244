//! The fast path against the exact one (capture, `serde_json`, re-escaping): wherever the fast path
//! accepts an entry, it must give the same length, fields and canonical text.

use super::scan_fast;
use crate::core::bundle::digest::write_entry_canonical;
use crate::core::bundle::scan::Scanner;
use crate::core::bundle::{Entry, EntryRef};
use proptest::prelude::*;

/// What the exact path gives for the entry at the start of `text`: its length, fields and
/// canonical text (`None`: it does not parse strictly).
fn exact(text: &[u8]) -> Option<(usize, Entry, Vec<u8>)> {
    let mut s = Scanner::new(text);
    let (_, raw) = s.capture().ok()?;
    let e: EntryRef<'_> = serde_json::from_slice(raw).ok()?;
    let mut canonical = Vec::new();
    write_entry_canonical(&mut canonical, &e);
    Some((raw.len(), e.to_owned_entry(), canonical))
}

fn fast(text: &[u8], limit: usize) -> Option<(usize, Entry, Vec<u8>)> {
    let found = scan_fast(text, limit)?;
    let mut payload = String::from("left over");
    let mut canonical = Vec::new();
    found.write_canonical(&mut canonical);
    Some((
        found.byte_len(),
        found.entry(&mut payload).to_owned_entry(),
        canonical,
    ))
}

const REAL: &str = r#"{
          "nodeId": "node-00",
          "tHlc": "1767614400000:1:node-00",
          "jobId": "5caa2cdb-e30c-55f1-9426-16b164a07bf4",
          "partitionKey": "p0",
          "payload": "{\"attempt\":0,\"kind\":\"scan\",\"node\":\"node-00\",\"seed\":0,\"seq\":0,\"target\":\"registry.local/app-0:1.0\"}",
          "payloadHash": "EhGHwXMcPIio1E8CWC9kOMJdV/iOO0M7RuCvuS869Ds=",
          "prevLink": null,
          "link": "EPIqY5jTiA3h74vbNeiObm489e0vpj4KK7dFVTi8HFA=",
          "enqueuedAt": "2026-01-05T12:00:00.000Z"
        },
        {"#;

#[test]
fn takes_the_common_shape_and_agrees_with_the_exact_path() {
    let got = fast(REAL.as_bytes(), usize::MAX).expect("the common shape is taken");
    assert_eq!(Some(got.clone()), exact(REAL.as_bytes()));
    assert_eq!(got.1.payload.as_bytes()[..12], *br#"{"attempt":0"#);
    assert_eq!(&REAL[got.0 - 1..got.0], "}");
    // With a link instead of null, without partitionKey, compact.
    let compact = r#"{"nodeId":"n","tHlc":"1:0:n","jobId":"j","payload":"{}","payloadHash":"h","prevLink":"p","link":"l","enqueuedAt":"t"}"#;
    let got = fast(compact.as_bytes(), usize::MAX).expect("taken");
    assert_eq!(got.0, compact.len());
    assert_eq!(Some(got), exact(compact.as_bytes()));
}

#[test]
fn declines_what_it_does_not_handle() {
    let base = r#"{"nodeId":"n","tHlc":"t","jobId":"j","payload":"{}","payloadHash":"h","prevLink":null,"link":"l","enqueuedAt":"e"}"#;
    assert!(fast(base.as_bytes(), usize::MAX).is_some());
    let declined = [
        base.replace(r#""n""#, r#""\u006e""#),
        base.replace(r#""{}""#, r#""\/""#),
        base.replace(r#""{}""#, r#""a\nb""#),
        base.replace(r#""n""#, "\"a\\\"b\""),
        base.replace(r#""n""#, "\"a\u{1}b\""),
        base.replace(r#""nodeId""#, r#""node\u0049d""#),
        base.replace(r#""nodeId":"n","#, ""),
        base.replace(r#""prevLink":null,"#, ""),
        base.replace(r#""link":"l""#, r#""link":"l","link":"l""#),
        base.replace(r#""link":"l""#, r#""link":"l","extra":"x""#),
        base.replace(r#""link":"l""#, r#""link":"l","partitionKey":null"#),
        base.replace(r#""t""#, "1"),
        base.replace(r#""t""#, "true"),
        base.replace(r#""t""#, "null"),
        base.replace(r#""t""#, r#"{"a":"b"}"#),
        base.replace(r#""e"}"#, r#""e",}"#),
        base.replace(r#"null"#, r#"nul"#),
        base[..base.len() - 1].to_string(),
        base[1..].to_string(),
    ];
    for text in declined {
        assert_eq!(fast(text.as_bytes(), usize::MAX), None, "{text}");
    }
    let mut bad_utf8 = base.replace(r#""n""#, r#""nX""#).into_bytes();
    let x = bad_utf8.iter().position(|&b| b == b'X').unwrap();
    bad_utf8[x] = 0xff;
    assert_eq!(fast(&bad_utf8, usize::MAX), None);
    // A stray byte of 0x80 and above anywhere in a long string (the sixteen-byte blocks, the block
    // holding its closing quote, the bytes after an escape): the ASCII shortcut never skips the
    // UTF-8 check for it.
    let long = base.replace(r#""{}""#, r#""0123456789abcdef0123456789\"abcdefXYZ""#);
    assert!(fast(long.as_bytes(), usize::MAX).is_some());
    let at = long.find("0123").unwrap();
    for k in at..at + 42 {
        for byte in [0x80u8, 0xc3, 0xff] {
            let mut b = long.clone().into_bytes();
            if b[k] == b'"' || b[k] == b'\\' {
                continue;
            }
            b[k] = byte;
            assert_eq!(fast(&b, usize::MAX), None, "byte {byte:#x} at {k}");
        }
    }
    assert_eq!(
        fast(base.as_bytes(), base.len() - 1),
        None,
        "over the limit"
    );
    assert!(fast(base.as_bytes(), base.len()).is_some());
}

/// A JSON value's text for a member: mostly strings in various spellings, sometimes other types.
fn value_text() -> impl Strategy<Value = String> {
    prop_oneof![
        12 => "[a-zA-Z0-9:+/=.-]{0,12}".prop_map(|s| serde_json::to_string(&s).unwrap()),
        2 => any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap()),
        2 => "[ -~é\"\\\\\u{1}\n\u{7f}\u{1F600}]{0,10}".prop_map(|s| serde_json::to_string(&s).unwrap()),
        1 => prop_oneof![
            Just(r#""a\u0041""#.to_string()),
            Just(r#""a\/b""#.to_string()),
            Just(r#""\ud83d\ude00""#.to_string()),
            Just("\"a\u{9}b\"".to_string()),
            Just("null".to_string()),
            Just("1".to_string()),
            Just("true".to_string()),
            Just("{}".to_string()),
            Just(r#"["x"]"#.to_string()),
        ],
    ]
}

/// A payload: canonical-looking JSON text, as a JSON string.
fn payload_text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::btree_map("[a-z\"\\\\é]{1,6}", "[ -~é\u{1}]{0,8}", 0..5)
            .prop_map(|m| serde_json::to_string(&serde_json::to_string(&m).unwrap()).unwrap()),
        value_text(),
    ]
}

fn whitespace() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just(""), Just(" "), Just("\n      "), Just("\t\r\n")]
}

/// An entry's members (all nine, shuffled) with some mutations, and the text around it.
fn entry_text() -> impl Strategy<Value = String> {
    let keys = super::KEYS.map(|k| std::str::from_utf8(k).expect("ASCII keys"));
    let members = (
        prop::collection::vec(value_text(), 9),
        payload_text(),
        prop_oneof![Just("null".to_string()), value_text()],
    )
        .prop_map(move |(mut values, payload, prev)| {
            values[super::PAYLOAD] = payload;
            values[super::PREV_LINK] = prev;
            keys.iter()
                .map(|k| format!("\"{k}\""))
                .zip(values)
                .collect::<Vec<_>>()
        });
    let extra_key = prop_oneof![
        Just("\"extra\"".to_string()),
        Just("\"link\"".to_string()),
        Just("\"node\\u0049d\"".to_string()),
        Just("\"partitionKey\"".to_string()),
    ];
    (
        members.prop_shuffle(),
        prop::option::weighted(0.2, 0usize..9),
        prop::option::weighted(0.2, (extra_key, value_text(), 0usize..10)),
        [whitespace(), whitespace(), whitespace(), whitespace()],
        prop_oneof![Just(""), Just(",\n  {\"nodeId\""), Just("]}"), Just(" ")],
        prop::option::weighted(0.2, 0usize..400),
    )
        .prop_map(|(mut members, drop, extra, ws, suffix, cut)| {
            if let Some(d) = drop {
                members.remove(d);
            }
            if let Some((k, v, at)) = extra {
                members.insert(at.min(members.len()), (k, v));
            }
            let body: Vec<String> = members
                .iter()
                .map(|(k, v)| format!("{}{k}{}:{}{v}{}", ws[0], ws[1], ws[2], ws[3]))
                .collect();
            let mut text = format!("{{{}}}{suffix}", body.join(","));
            if let Some(c) = cut {
                let mut c = c.min(text.len());
                while !text.is_char_boundary(c) {
                    c -= 1;
                }
                text.truncate(c);
            }
            text
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn where_the_fast_path_accepts_it_agrees_with_the_exact_path(text in entry_text()) {
        if let Some(got) = fast(text.as_bytes(), usize::MAX) {
            prop_assert_eq!(Some(got), exact(text.as_bytes()), "{}", text);
        }
    }

    #[test]
    fn plain_entries_of_the_common_shape_are_taken(
        values in prop::collection::vec("[a-zA-Z0-9:+/=.-]{0,12}", 8),
        payload in prop::collection::btree_map("[a-z\"\\\\]{1,6}", "[ -~é]{0,8}", 0..5),
        ws in whitespace(),
    ) {
        let payload = serde_json::to_string(&payload).unwrap();
        let text = format!(
            r#"{{{ws}"tHlc":{ws}{:?},"nodeId":{:?},"jobId":{:?},"payload":{},"payloadHash":{:?},"prevLink":{:?},"link":{:?},"enqueuedAt":{:?},"partitionKey":{:?}{ws}}}"#,
            values[0], values[1], values[2], serde_json::to_string(&payload).unwrap(),
            values[3], values[4], values[5], values[6], values[7],
        );
        let got = fast(text.as_bytes(), usize::MAX);
        prop_assert!(got.is_some(), "{}", text);
        prop_assert_eq!(got, exact(text.as_bytes()));
    }
}

/// The byte loops the block-at-a-time scans replaced: the reference they are compared with.
fn string_end_bytewise(b: &[u8], i: usize) -> Option<(usize, bool)> {
    let mut p = i + 1;
    let mut escaped = false;
    loop {
        match *b.get(p)? {
            b'"' => return Some((p + 1, escaped)),
            b'\\' if matches!(b.get(p + 1)?, b'"' | b'\\') => {
                escaped = true;
                p += 2;
            }
            c if c < 0x20 || c == b'\\' => return None,
            _ => p += 1,
        }
    }
}

fn skip_ws_bytewise(b: &[u8], mut i: usize) -> Option<usize> {
    while matches!(b.get(i)?, b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    Some(i)
}

/// A string's opening quote and text dense with escapes, quotes and backslashes (a payload's),
/// sometimes a control byte or a stray byte.
fn escape_heavy() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        6 => Just(&b"\\\""[..]),
        3 => Just(&b"ab"[..]),
        2 => Just(&b"a"[..]),
        2 => Just(&b"\\\\"[..]),
        1 => Just(&b"\""[..]),
        1 => Just(&b"\\"[..]),
        1 => Just(&b"\\n"[..]),
        1 => Just(&b"\n"[..]),
        1 => Just(&b"\xc3\xa9"[..]),
    ];
    prop::collection::vec(piece, 0..60).prop_map(|pieces| {
        let mut b = vec![b'"'];
        for p in pieces {
            b.extend_from_slice(p);
        }
        b
    })
}

fn tricky_bytes() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        4 => Just(b' '),
        2 => Just(b'a'),
        1 => Just(b'"'),
        1 => Just(b'\\'),
        1 => Just(b'\n'),
        1 => Just(b'\t'),
        1 => Just(b'\r'),
        1 => 0u8..0x20,
        1 => 0x7fu8..=0xff,
        1 => any::<u8>(),
    ];
    prop::collection::vec(byte, 0..80)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_block_scans_agree_with_the_byte_loops_at_every_alignment(b in tricky_bytes()) {
        for i in 0..b.len() {
            prop_assert_eq!(super::skip_ws(&b, i), skip_ws_bytewise(&b, i), "skip_ws at {} of {:?}", i, b);
            if b[i] == b'"' {
                prop_assert_eq!(super::string_end(&b, i), string_end_bytewise(&b, i), "string_end at {} of {:?}", i, b);
            }
        }
        prop_assert_eq!(super::skip_ws(&b, b.len()), None);
    }

    #[test]
    fn the_escape_masks_find_the_end_of_escape_heavy_strings(b in escape_heavy(), lead in 0usize..16) {
        // Every alignment of the opening quote.
        let mut text = vec![b' '; lead];
        text.extend_from_slice(&b);
        prop_assert_eq!(super::string_end(&text, lead), string_end_bytewise(&text, lead), "{:?}", String::from_utf8_lossy(&text));
    }
}

#[test]
fn each_member_prefix_is_its_key_in_canonical_text() {
    for (k, key) in super::KEYS.iter().enumerate() {
        let opening = if k == 0 { "{" } else { "," };
        let want = format!("{opening}\"{}\":", std::str::from_utf8(key).unwrap());
        assert_eq!(super::MEMBER_PREFIXES[k], want.as_bytes());
    }
}
