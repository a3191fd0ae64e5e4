//! Standard Webhooks' signature (<https://www.standardwebhooks.com>): a delivery carries
//! `webhook-id`, `webhook-timestamp` (Unix seconds) and `webhook-signature`, `v1,` and the
//! base64 HMAC-SHA256 of `{id}.{timestamp}.{body}` keyed with the secret's bytes. A secret
//! is `whsec_` and the base64 of those bytes; the receiver's libraries (`standardwebhooks`,
//! Svix's) verify it as it is.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

const PREFIX: &str = "whsec_";
/// Bytes of a secret the server makes.
const SECRET_BYTES: usize = 24;
/// A caller's own secret: at least this many bytes (and at most 64).
const MIN_SECRET_BYTES: usize = 16;
const MAX_SECRET_BYTES: usize = 64;

/// A webhook's signing key.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// A new random secret.
    pub fn random() -> Secret {
        Secret((0..SECRET_BYTES).map(|_| rand::random::<u8>()).collect())
    }

    /// A caller's `whsec_…` secret; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Secret, String> {
        let b64 = text
            .strip_prefix(PREFIX)
            .ok_or_else(|| format!("a secret is `{PREFIX}` and base64"))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| format!("the part after `{PREFIX}` is not base64"))?;
        if !(MIN_SECRET_BYTES..=MAX_SECRET_BYTES).contains(&bytes.len()) {
            return Err(format!(
                "a secret holds {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes"
            ));
        }
        Ok(Secret(bytes))
    }

    /// As the caller is given it, once.
    pub fn text(&self) -> String {
        format!(
            "{PREFIX}{}",
            base64::engine::general_purpose::STANDARD.encode(&self.0)
        )
    }

    /// `webhook-signature` of a delivery.
    pub fn sign(&self, id: &str, timestamp: u64, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        let tag = mac.finalize().into_bytes();
        format!(
            "v1,{}",
            base64::engine::general_purpose::STANDARD.encode(tag)
        )
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The specification's own example.
    #[test]
    fn signs_as_the_standard_webhooks_example_does() {
        let s = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            s.sign(
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1614265330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn secrets_round_trip_and_bad_ones_are_named() {
        let s = Secret::random();
        assert_eq!(Secret::parse(&s.text()).unwrap().0, s.0);
        assert!(
            Secret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
                .unwrap_err()
                .contains("whsec_")
        );
        assert!(Secret::parse("whsec_!!").unwrap_err().contains("base64"));
        assert!(
            Secret::parse("whsec_c2hvcnQ=")
                .unwrap_err()
                .contains("16 to 64")
        );
    }
}
