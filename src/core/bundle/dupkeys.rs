//! Keys repeated inside one JSON object, at any depth (SPEC section 6: `schema-invalid`).
//!
//! A JSON parser that keeps the last of two equal keys (serde_json's `Value`) would silently pick one
//! meaning for an ambiguous document, so every reader of attacker-supplied JSON checks for repeats
//! first. One pass, one `HashSet` per object: linear in the input whatever the keys are.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;
use std::fmt;

/// A key that repeats an earlier key of the same JSON object: the key and the JSON path of the
/// repeat. Its message says what is wrong, where, and what to do; callers add what they refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the key \"{}\" appears twice in one JSON object (at {}): which value is meant is ambiguous; give each key once", crate::core::text::visible(key), crate::core::text::visible(path))]
pub struct RepeatedKey {
    pub key: String,
    pub path: String,
}

/// The JSON paths (under `base`, e.g. `$.jobLogs[0].entries[3]`) of the keys that repeat an
/// earlier key of the same object, anywhere inside the complete JSON value `raw`: the first
/// [`MAX_REPEATS_REPORTED`] of them, in document order.
pub fn repeated_keys(raw: &[u8], base: &str) -> Result<Vec<String>, serde_json::Error> {
    Ok(walk(raw, base, MAX_REPEATS_REPORTED)?
        .into_iter()
        .map(|r| r.path)
        .collect())
}

/// The first key repeated inside the complete JSON value `raw` (in document order), if any. The
/// one check every reader of a JSON object given on the command line (job payloads, ledger and WAL
/// events) runs before a last-wins parse could silently pick one of the values.
pub fn first_repeated_key(
    raw: &[u8],
    base: &str,
) -> Result<Option<RepeatedKey>, serde_json::Error> {
    if !may_hold_keys(raw.trim_ascii_start()) {
        return Ok(None);
    }
    Ok(walk(raw, base, 1)?.into_iter().next())
}

/// How many repeats [`repeated_keys`] reports for one value (one is enough to refuse it; a
/// document of millions of repeats would otherwise make a report of millions of paths).
pub const MAX_REPEATS_REPORTED: usize = 1000;

/// A key longer than this many bytes is shown in a path by its first bytes and its length: every
/// path then stays short whatever the keys above it, so reporting repeats costs no more than the
/// repeats themselves.
const PATH_KEY_SHOWN: usize = 256;

/// The walk keeps the path as a stack of steps and writes it out only for a repeat it reports:
/// building each value's path as text (its parent's path and one more step) made a long key
/// above a large array or object cost its length once per element, quadratic in the input.
fn walk(raw: &[u8], base: &str, limit: usize) -> Result<Vec<RepeatedKey>, serde_json::Error> {
    let mut out = Vec::new();
    let mut steps = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(raw);
    Walk {
        base,
        steps: &mut steps,
        out: &mut out,
        limit,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(out)
}

/// Whether a value can hold objects at all (scalars are skipped without parsing).
pub fn may_hold_keys(raw: &[u8]) -> bool {
    raw.first().is_some_and(|b| b"{[".contains(b))
}

/// One step from a value to a member (by key) or an element (by index).
enum Step {
    Key(String),
    Index(usize),
}

/// `base` followed by `steps` and, last, `key`: `$.a[3].key`.
fn render(base: &str, steps: &[Step], key: &str) -> String {
    use std::fmt::Write;
    let mut path = String::from(base);
    for step in steps {
        match step {
            Step::Key(k) => {
                path.push('.');
                push_key(&mut path, k);
            }
            Step::Index(i) => {
                let _ = write!(path, "[{i}]");
            }
        }
    }
    path.push('.');
    push_key(&mut path, key);
    path
}

fn push_key(path: &mut String, key: &str) {
    if key.len() <= PATH_KEY_SHOWN {
        path.push_str(key);
        return;
    }
    let mut end = PATH_KEY_SHOWN;
    while !key.is_char_boundary(end) {
        end -= 1;
    }
    path.push_str(&key[..end]);
    path.push_str(&format!("...({} bytes)", key.len()));
}

struct Walk<'w> {
    base: &'w str,
    steps: &'w mut Vec<Step>,
    out: &'w mut Vec<RepeatedKey>,
    /// How many repeats to record; the rest of the document is still checked as JSON.
    limit: usize,
}

impl Walk<'_> {
    fn child(&mut self) -> Walk<'_> {
        Walk {
            base: self.base,
            steps: &mut *self.steps,
            out: &mut *self.out,
            limit: self.limit,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            self.steps.push(Step::Index(i));
            let more = seq.next_element_seed(self.child())?;
            self.steps.pop();
            if more.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let mut seen: HashSet<String> = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if seen.contains(&key) {
                if self.out.len() < self.limit {
                    let path = render(self.base, self.steps, &key);
                    self.out.push(RepeatedKey {
                        key: key.clone(),
                        path,
                    });
                }
            } else {
                seen.insert(key.clone());
            }
            self.steps.push(Step::Key(key));
            map.next_value_seed(self.child())?;
            self.steps.pop();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_found_at_every_level_with_their_path() {
        let raw = br#"{"a":1,"b":{"c":[{"d":1,"d":2}],"c":0},"a":1}"#;
        let got = repeated_keys(raw, "$").unwrap();
        assert_eq!(got, ["$.b.c[0].d", "$.b.c", "$.a"]);
        assert!(
            repeated_keys(br#"{"a":{"a":1},"b":[{"a":1},{"a":2}]}"#, "$")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn the_first_repeat_names_its_key_and_path() {
        let raw = br#" {"spec":{"a":1,"a":2},"spec":0}"#;
        let r = first_repeated_key(raw, "$").unwrap().expect("a repeat");
        assert_eq!((r.key.as_str(), r.path.as_str()), ("a", "$.spec.a"));
        let text = r.to_string();
        assert!(
            text.contains("\"a\"") && text.contains("$.spec.a"),
            "{text}"
        );
        assert_eq!(first_repeated_key(br#"{"a":1}"#, "$").unwrap(), None);
        assert_eq!(first_repeated_key(b"12", "$").unwrap(), None);
        assert!(first_repeated_key(b"{", "$").is_err());
        let esc = first_repeated_key(b"{\"\\u001b\":1,\"\\u001b\":2}", "$").unwrap();
        assert!(!esc.expect("repeat").to_string().contains('\u{1b}'));
    }

    #[test]
    fn many_distinct_keys_stay_linear() {
        // 200,000 distinct keys and one repeat at the end: one pass with a hash set.
        let mut raw = String::from("{");
        for i in 0..200_000 {
            raw.push_str(&format!("\"k{i}\":0,"));
        }
        raw.push_str("\"k7\":1}");
        assert_eq!(repeated_keys(raw.as_bytes(), "$").unwrap(), ["$.k7"]);
    }

    #[test]
    fn long_keys_are_shortened_in_paths_and_repeats_reported_are_capped() {
        let long = "k".repeat(PATH_KEY_SHOWN + 10);
        let raw = format!(r#"{{"{long}":[{{"a":1}},{{"a":1,"a":2}}]}}"#);
        let want = format!(
            "$.{}...({} bytes)[1].a",
            &long[..PATH_KEY_SHOWN],
            long.len()
        );
        assert_eq!(repeated_keys(raw.as_bytes(), "$").unwrap(), [want]);
        let r = first_repeated_key(raw.as_bytes(), "$").unwrap().unwrap();
        assert_eq!(r.key, "a");
        // Two thousand repeats in one object: the first ones are named, and the walk still
        // checks the whole document.
        let mut many = String::from("{\"a\":0");
        for _ in 0..2000 {
            many.push_str(",\"a\":0");
        }
        many.push('}');
        assert_eq!(
            repeated_keys(many.as_bytes(), "$").unwrap().len(),
            MAX_REPEATS_REPORTED
        );
        many.pop();
        assert!(repeated_keys(many.as_bytes(), "$").is_err());
    }
}
