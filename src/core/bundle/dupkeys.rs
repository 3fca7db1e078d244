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

/// The JSON paths (under `base`, e.g. `$.jobLogs[0].entries[3]`) of every key that repeats an
/// earlier key of the same object, anywhere inside the complete JSON value `raw`.
pub fn repeated_keys(raw: &[u8], base: &str) -> Result<Vec<String>, serde_json::Error> {
    Ok(walk(raw, base)?.into_iter().map(|r| r.path).collect())
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
    Ok(walk(raw, base)?.into_iter().next())
}

fn walk(raw: &[u8], base: &str) -> Result<Vec<RepeatedKey>, serde_json::Error> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(raw);
    Walk {
        path: base.to_string(),
        out: &mut out,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(out)
}

/// Whether a value can hold objects at all (scalars are skipped without parsing).
pub fn may_hold_keys(raw: &[u8]) -> bool {
    matches!(raw.first(), Some(b'{') | Some(b'['))
}

struct Walk<'o> {
    path: String,
    out: &'o mut Vec<RepeatedKey>,
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
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            let child = Walk {
                path: format!("{}[{i}]", self.path),
                out: &mut *self.out,
            };
            if seq.next_element_seed(child)?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen: HashSet<String> = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = format!("{}.{key}", self.path);
            if let Some(key) = seen.replace(key) {
                self.out.push(RepeatedKey {
                    key,
                    path: path.clone(),
                });
            }
            map.next_value_seed(Walk {
                path,
                out: &mut *self.out,
            })?;
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
}
