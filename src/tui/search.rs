//! `/` search inside a list or text panel: case-insensitive substring over each row's text, `n` /
//! `N` to the next / previous match, wrapping around the ends (and saying so).

/// How far one `n` looks before it stops and says so (a chain of millions of entries is read row
/// by row from its file).
pub const SEARCH_LIMIT: usize = 200_000;

/// Where a search landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hit {
    /// Row `at`; `wrapped` when the search passed the end (or the start, going back).
    Found { at: usize, wrapped: bool },
    /// No row matches.
    None,
    /// Nothing in the `SEARCH_LIMIT` rows looked at; `n` again continues from `at`.
    GaveUp { at: usize },
}

/// Finds the next row (after `from`, or before it going back) whose text contains `term`
/// (lowercase), among `len` rows; `text` gives a row's text (`None`: not available, skipped).
pub fn find(
    len: usize,
    from: usize,
    forward: bool,
    term: &str,
    mut text: impl FnMut(usize) -> Option<String>,
) -> Hit {
    if len == 0 || term.is_empty() {
        return Hit::None;
    }
    let from = from.min(len - 1);
    let steps = len.min(SEARCH_LIMIT);
    for k in 1..=steps {
        let (at, wrapped) = if forward {
            let i = from + k;
            (i % len, i >= len)
        } else {
            let i = from as isize - k as isize;
            (i.rem_euclid(len as isize) as usize, i < 0)
        };
        if text(at).is_some_and(|t| t.to_lowercase().contains(term)) {
            return Hit::Found { at, wrapped };
        }
    }
    if steps < len {
        let at = if forward {
            (from + steps) % len
        } else {
            (from as isize - steps as isize).rem_euclid(len as isize) as usize
        };
        return Hit::GaveUp { at };
    }
    Hit::None
}

/// A `goto` command from the palette: `goto seq N` or `goto job ID`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Goto {
    Seq(u64),
    Job(String),
}

/// Parses `goto seq N` / `goto job ID` (also `goto N`); `None` when the input is not a goto.
pub fn parse_goto(input: &str) -> Option<Result<Goto, String>> {
    let mut words = input.split_whitespace();
    if words.next()? != "goto" {
        return None;
    }
    let usage = || "usage: goto seq N, or goto job JOB-ID".to_string();
    Some(match (words.next(), words.next(), words.next()) {
        (Some("seq"), Some(n), None) | (Some(n), None, None) => n
            .replace('_', "")
            .parse::<u64>()
            .map(Goto::Seq)
            .map_err(|_| format!("{n:?} is not a position; {}", usage())),
        (Some("job"), Some(id), None) => Ok(Goto::Job(id.to_lowercase())),
        _ => Err(usage()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_forward_and_back_and_wraps() {
        let rows = ["alpha", "beta", "gamma", "alphabet"];
        let t = |i: usize| Some(rows[i].to_string());
        assert_eq!(
            find(4, 0, true, "alpha", t),
            Hit::Found {
                at: 3,
                wrapped: false
            }
        );
        assert_eq!(
            find(4, 3, true, "alpha", t),
            Hit::Found {
                at: 0,
                wrapped: true
            }
        );
        assert_eq!(
            find(4, 0, false, "alpha", t),
            Hit::Found {
                at: 3,
                wrapped: true
            }
        );
        assert_eq!(find(4, 0, true, "zeta", t), Hit::None);
        assert_eq!(find(0, 0, true, "a", t), Hit::None);
    }

    #[test]
    fn goto_parses_seq_and_job() {
        assert_eq!(
            parse_goto("goto seq 1_099_999"),
            Some(Ok(Goto::Seq(1_099_999)))
        );
        assert_eq!(parse_goto("goto 12"), Some(Ok(Goto::Seq(12))));
        assert_eq!(
            parse_goto("goto job ABC"),
            Some(Ok(Goto::Job("abc".into())))
        );
        assert!(parse_goto("goto seq x").unwrap().is_err());
        assert!(parse_goto("trust").is_none());
    }
}
