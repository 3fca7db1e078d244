//! A map keyed by datacenter id, in key order, sized for the usual handful of DCs per job.
//!
//! A job names a few DCs, so its per-DC state (acceptances, latest progress, cancellation
//! acknowledgements) is a sorted vector of exactly its length: one allocation, no tree node with
//! room for eleven. DC ids are attacker-chosen text, so past [`FEW`] entries the map becomes a
//! B-tree and stays O(log n) per lookup. It serializes as a JSON object, like a `BTreeMap`.

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::marker::PhantomData;

/// Past this many DCs the map is a B-tree.
pub const FEW: usize = 8;

#[derive(Debug, Clone)]
enum Entries<V> {
    /// Sorted by DC id, distinct, capacity = length.
    Few(Vec<(Box<str>, V)>),
    Many(BTreeMap<Box<str>, V>),
}

/// DC id → `V`, iterated in DC id order.
#[derive(Debug, Clone)]
pub struct DcMap<V> {
    entries: Entries<V>,
}

impl<V> Default for DcMap<V> {
    fn default() -> Self {
        DcMap {
            entries: Entries::Few(Vec::new()),
        }
    }
}

impl<V: PartialEq> PartialEq for DcMap<V> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

impl<V> DcMap<V> {
    pub fn len(&self) -> usize {
        match &self.entries {
            Entries::Few(v) => v.len(),
            Entries::Many(m) => m.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, dc: &str) -> Option<&V> {
        match &self.entries {
            Entries::Few(v) => v.iter().find(|(k, _)| &**k == dc).map(|(_, x)| x),
            Entries::Many(m) => m.get(dc),
        }
    }

    pub fn get_mut(&mut self, dc: &str) -> Option<&mut V> {
        match &mut self.entries {
            Entries::Few(v) => v.iter_mut().find(|(k, _)| &**k == dc).map(|(_, x)| x),
            Entries::Many(m) => m.get_mut(dc),
        }
    }

    pub fn contains_key(&self, dc: &str) -> bool {
        self.get(dc).is_some()
    }

    /// The value of `dc`, made with `make` if absent.
    pub fn get_or_insert_with(&mut self, dc: &str, make: impl FnOnce() -> V) -> &mut V {
        let find = |v: &[(Box<str>, V)]| v.binary_search_by(|(k, _)| (**k).cmp(dc));
        if let Entries::Few(v) = &mut self.entries {
            if v.len() >= FEW && find(v).is_err() {
                let tree: BTreeMap<Box<str>, V> = v.drain(..).collect();
                self.entries = Entries::Many(tree);
            }
        }
        match &mut self.entries {
            Entries::Few(v) => {
                let i = match find(v) {
                    Ok(i) => i,
                    Err(i) => {
                        v.reserve_exact(1);
                        v.insert(i, (dc.into(), make()));
                        i
                    }
                };
                &mut v[i].1
            }
            Entries::Many(m) => m.entry(dc.into()).or_insert_with(make),
        }
    }

    /// The map of these entries (the small form when they are few).
    fn from_tree(tree: BTreeMap<Box<str>, V>) -> DcMap<V> {
        let entries = if tree.len() <= FEW {
            let mut v = Vec::with_capacity(tree.len());
            v.extend(tree);
            Entries::Few(v)
        } else {
            Entries::Many(tree)
        };
        DcMap { entries }
    }

    /// Entries in DC id order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (&str, &V)> + '_> {
        match &self.entries {
            Entries::Few(v) => Box::new(v.iter().map(|(k, x)| (&**k, x))),
            Entries::Many(m) => Box::new(m.iter().map(|(k, x)| (&**k, x))),
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.iter().map(|(k, _)| k)
    }

    pub fn values_mut(&mut self) -> Box<dyn Iterator<Item = &mut V> + '_> {
        match &mut self.entries {
            Entries::Few(v) => Box::new(v.iter_mut().map(|(_, x)| x)),
            Entries::Many(m) => Box::new(m.values_mut()),
        }
    }

    /// Entries in DC id order, owned.
    pub fn into_entries(self) -> Box<dyn Iterator<Item = (Box<str>, V)>>
    where
        V: 'static,
    {
        match self.entries {
            Entries::Few(v) => Box::new(v.into_iter()),
            Entries::Many(m) => Box::new(m.into_iter()),
        }
    }
}

impl<V: Serialize> Serialize for DcMap<V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for DcMap<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for Visit<V> {
            type Value = DcMap<V>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object keyed by datacenter id")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<DcMap<V>, A::Error> {
                let mut tree = BTreeMap::new();
                while let Some((k, v)) = a.next_entry::<std::borrow::Cow<'de, str>, V>()? {
                    if tree.insert(Box::<str>::from(&*k), v).is_some() {
                        return Err(serde::de::Error::custom(format!(
                            "datacenter {k:?} appears twice"
                        )));
                    }
                }
                Ok(DcMap::from_tree(tree))
            }
        }
        d.deserialize_map(Visit(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_and_lookups_do_not_depend_on_the_representation() {
        let mut small = DcMap::default();
        let mut big = DcMap::default();
        let names: Vec<String> = (0..3 * FEW)
            .map(|i| format!("dc{:02}", (i * 7) % 24))
            .collect();
        for (i, n) in names.iter().enumerate() {
            *big.get_or_insert_with(n, || 0) += i;
            if i < FEW {
                *small.get_or_insert_with(n, || 0) += i;
            }
        }
        assert_eq!(small.len(), FEW);
        assert_eq!(big.len(), 3 * FEW);
        let keys: Vec<&str> = big.keys().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        assert_eq!(small.keys().collect::<Vec<_>>().len(), FEW);
        assert!(small.keys().zip(small.keys().skip(1)).all(|(a, b)| a < b));
        assert_eq!(big.get("dc07"), Some(&1));
        assert_eq!(big.get("nope"), None);
        let json = serde_json::to_string(&big).unwrap();
        let back: DcMap<usize> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, big);
        let twice = serde_json::from_str::<DcMap<u8>>(r#"{"a":1,"a":2}"#).unwrap_err();
        assert!(twice.to_string().contains("twice"), "{twice}");
    }
}
