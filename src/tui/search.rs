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
    text: impl FnMut(usize) -> Option<String>,
) -> Hit {
    find_within(len, from, forward, term, SEARCH_LIMIT, text, |_| true).unwrap_or(Hit::None)
}

/// Rows looked at between two calls of a scan's `tick` (how soon it sees it was cancelled).
pub const TICK_ROWS: usize = 256;

/// [`find`] looking at no more than `limit` rows (at least one), calling `tick` with the rows
/// looked at so far every [`TICK_ROWS`] rows: `None` when `tick` says stop (the scan was
/// cancelled). A search that looked at fewer rows than `len` without a match gave up.
pub fn find_within(
    len: usize,
    from: usize,
    forward: bool,
    term: &str,
    limit: usize,
    mut text: impl FnMut(usize) -> Option<String>,
    mut tick: impl FnMut(usize) -> bool,
) -> Option<Hit> {
    if len == 0 || term.is_empty() {
        return Some(Hit::None);
    }
    let from = from.min(len - 1);
    let steps = len.min(limit.max(1));
    for k in 1..=steps {
        if k.is_multiple_of(TICK_ROWS) && !tick(k) {
            return None;
        }
        let (at, wrapped) = if forward {
            let i = from + k;
            (i % len, i >= len)
        } else {
            let i = from as isize - k as isize;
            (i.rem_euclid(len as isize) as usize, i < 0)
        };
        if text(at).is_some_and(|t| t.to_lowercase().contains(term)) {
            return Some(Hit::Found { at, wrapped });
        }
    }
    if steps < len {
        let at = if forward {
            (from + steps) % len
        } else {
            (from as isize - steps as isize).rem_euclid(len as isize) as usize
        };
        return Some(Hit::GaveUp { at });
    }
    Some(Hit::None)
}

/// A list's rows as a background `/` search reads them: row `i`'s text, or `None` when it has
/// none. It holds what it reads (an `Arc` of the screen's data), not the screen, so the search
/// runs off the UI thread while the screen keeps drawing and taking keys.
pub type RowText = Box<dyn FnMut(usize) -> Option<String> + Send>;

/// What a background `/` search or `:goto job` lookup reports (see `TaskMsg::Scanned`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanEvent {
    /// Rows (entries) looked at so far.
    Progress(usize),
    /// Where a search step landed.
    Searched(Hit),
    /// Where a jobId is: (node log, entry), or nowhere.
    JobAt(Option<(usize, usize)>),
    /// The scan could not read its rows (the store's message).
    Failed(String),
}

/// `n` with thousands separators: `1,000,000`.
pub fn count(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A `goto` command from the palette: `goto seq N` or `goto job ID`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Goto {
    Seq(u64),
    Job(String),
    /// A WAL frame by its LSN (the WAL screen; `goto N` there means an LSN too).
    Lsn(u64),
}

/// Parses `goto seq N` / `goto job ID` / `goto lsn N` (also `goto N`); `None` when the input is
/// not a goto.
pub fn parse_goto(input: &str) -> Option<Result<Goto, String>> {
    let mut words = input.split_whitespace();
    if words.next()? != "goto" {
        return None;
    }
    let usage = || "usage: goto seq N, goto job JOB-ID, or goto lsn N (WAL)".to_string();
    Some(match (words.next(), words.next(), words.next()) {
        (Some("lsn"), Some(n), None) => n
            .replace('_', "")
            .parse::<u64>()
            .map(Goto::Lsn)
            .map_err(|_| format!("{n:?} is not an LSN; {}", usage())),
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
    fn a_limited_search_gives_up_and_a_tick_cancels_it() {
        let t = |i: usize| Some(if i == 900 { "needle" } else { "hay" }.to_string());
        assert_eq!(
            find_within(1000, 0, true, "needle", 100, t, |_| true),
            Some(Hit::GaveUp { at: 100 })
        );
        assert_eq!(
            find_within(1000, 100, true, "needle", 1000, t, |_| true),
            Some(Hit::Found {
                at: 900,
                wrapped: false
            })
        );
        assert_eq!(
            find_within(1000, 10, false, "needle", 50, t, |_| true),
            Some(Hit::GaveUp { at: 960 })
        );
        let mut ticks = Vec::new();
        let stopped = find_within(1000, 0, true, "needle", 1000, t, |k| {
            ticks.push(k);
            k < 2 * TICK_ROWS
        });
        assert_eq!(stopped, None);
        assert_eq!(ticks, [TICK_ROWS, 2 * TICK_ROWS]);
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1_000_000), "1,000,000");
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
        assert_eq!(parse_goto("goto lsn 1_000"), Some(Ok(Goto::Lsn(1000))));
        assert!(parse_goto("goto lsn -1").unwrap().is_err());
        assert!(parse_goto("trust").is_none());
    }
}
