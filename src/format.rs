//! Human formatting shared by every surface (CLI, console, service): sizes and the like. It holds
//! no rule of the data, only how a number reads.

/// `part` as a whole percentage of `whole` (0 when `whole` is 0).
pub fn percent(part: u64, whole: u64) -> u64 {
    part.saturating_mul(100).checked_div(whole).unwrap_or(0)
}

/// A human-readable byte size (`512 B`, `1.5 KiB`, `3.2 GiB`).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `n` and the noun in the number it calls for: `1 finding`, `2 findings`, `0 entries`
/// (`one` for exactly one, `many` otherwise, so irregular plurals are spelled by the caller).
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// [`count`] for a noun whose plural is the noun and an `s`: `1 ledger`, `3 ledgers`.
pub fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_as_units() {
        assert_eq!(super::human_bytes(512), "512 B");
        assert_eq!(super::human_bytes(1536), "1.5 KiB");
        assert_eq!(super::human_bytes(3 << 30), "3.0 GiB");
    }

    #[test]
    fn counts_agree_with_their_nouns() {
        assert_eq!(super::plural(1, "finding"), "1 finding");
        assert_eq!(super::plural(0, "finding"), "0 findings");
        assert_eq!(super::plural(2, "ledger"), "2 ledgers");
        assert_eq!(super::count(1, "entry", "entries"), "1 entry");
        assert_eq!(super::count(5, "entry", "entries"), "5 entries");
    }
}
