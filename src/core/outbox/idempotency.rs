//! The Idempotency-Key rule (SPEC section 9): every write the relay forwards or queues carries
//! exactly one key, the client's when it sent a valid one, else a fresh UUIDv4. A read gets no key
//! from the relay: one its client sent is forwarded unchanged, like its other headers (SPEC 9
//! restricts only what is stored, and reads are never stored). The relay and the demo both mint
//! keys here.

/// The longest Idempotency-Key accepted from a client.
pub const MAX_IDEMPOTENCY_KEY: usize = 200;

/// Why a request's Idempotency-Key header is refused (the relay answers 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdempotencyKeyError {
    #[error("more than one Idempotency-Key header: send exactly one")]
    Repeated,
    #[error("invalid Idempotency-Key header: use 1 to {MAX_IDEMPOTENCY_KEY} visible ASCII characters (a UUID is fine)")]
    Invalid,
}

/// A new key for a write whose client sent none.
pub fn new_idempotency_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Whether `key` is acceptable from a client: 1 to 200 visible ASCII characters.
pub fn valid_idempotency_key(key: &[u8]) -> bool {
    !key.is_empty()
        && key.len() <= MAX_IDEMPOTENCY_KEY
        && key.iter().all(|b| (0x21..0x7f).contains(b))
}

/// The key the relay decides for a request, from the raw values of its `Idempotency-Key` headers:
/// more than one header is refused (whatever the method: two keys are ambiguous), a write keeps its
/// valid key or gets a new one, a read gets none (`None`: the relay then forwards the read's own
/// header, if any, as the client sent it).
pub fn request_idempotency_key<'a>(
    header_values: impl IntoIterator<Item = &'a [u8]>,
    is_write: bool,
) -> Result<Option<String>, IdempotencyKeyError> {
    let mut values = header_values.into_iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(IdempotencyKeyError::Repeated);
    }
    if !is_write {
        return Ok(None);
    }
    match first {
        None => Ok(Some(new_idempotency_key())),
        Some(v) if valid_idempotency_key(v) => Ok(Some(String::from_utf8_lossy(v).into_owned())),
        Some(_) => Err(IdempotencyKeyError::Invalid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_valid_key_per_write_and_none_for_reads() {
        let k = |vals: &[&[u8]], w| request_idempotency_key(vals.iter().copied(), w);
        assert_eq!(k(&[b"k-1"], true), Ok(Some("k-1".into())));
        assert_eq!(k(&[b"k-1"], false), Ok(None));
        assert_eq!(k(&[], false), Ok(None));
        let minted = k(&[], true).unwrap().unwrap();
        assert!(uuid::Uuid::parse_str(&minted).is_ok(), "{minted}");
        assert_ne!(minted, k(&[], true).unwrap().unwrap());
        assert_eq!(k(&[b"a", b"b"], true), Err(IdempotencyKeyError::Repeated));
        assert_eq!(k(&[b"a", b"a"], false), Err(IdempotencyKeyError::Repeated));
        let long = vec![b'x'; MAX_IDEMPOTENCY_KEY + 1];
        for bad in [
            &b""[..],
            b"has space",
            b"tab\t",
            "caf\u{e9}".as_bytes(),
            &long,
        ] {
            assert_eq!(
                k(&[bad], true),
                Err(IdempotencyKeyError::Invalid),
                "{bad:?}"
            );
        }
        assert!(valid_idempotency_key(&long[..MAX_IDEMPOTENCY_KEY]));
    }
}
