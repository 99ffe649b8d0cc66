//! The local RSA public key (`agent.auth.local-public-key`): parsed and checked once, at startup.

use jsonwebtoken::DecodingKey;

/// Smallest RSA modulus accepted, in bits (the verifier refuses smaller keys anyway).
pub const MIN_RSA_BITS: usize = 2048;

/// A validated RSA public key from a PEM `-----BEGIN PUBLIC KEY-----` (SubjectPublicKeyInfo) block.
#[derive(Clone)]
pub struct LocalPublicKey {
    key: DecodingKey,
    bits: usize,
}

/// Why a configured local key cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyProblem {
    /// The configured text is empty or whitespace.
    Blank,
    /// Not a PEM SubjectPublicKeyInfo RSA key; the text says what is wrong (never the key itself).
    Invalid(&'static str),
}

impl LocalPublicKey {
    /// Parses PEM text. Surrounding whitespace is ignored, and so is a key given on one line with
    /// literal `\n` sequences (a common way to put PEM into an environment variable).
    pub fn from_pem(text: &str) -> Result<Self, KeyProblem> {
        let text = text.trim();
        if text.is_empty() {
            return Err(KeyProblem::Blank);
        }
        let text = if !text.contains('\n') && text.contains("\\n") { text.replace("\\n", "\n") } else { text.into() };
        let text = text.trim();
        if !text.starts_with("-----BEGIN PUBLIC KEY-----") || !text.ends_with("-----END PUBLIC KEY-----") {
            return Err(KeyProblem::Invalid(
                "expected one -----BEGIN PUBLIC KEY----- ... -----END PUBLIC KEY----- block",
            ));
        }
        let key = DecodingKey::from_rsa_pem(text.as_bytes())
            .map_err(|_| KeyProblem::Invalid("the PEM block is not an RSA SubjectPublicKeyInfo"))?;
        // jsonwebtoken only unwraps the PEM; have aws-lc check the key itself (RSA_check_key).
        let der = key.try_get_as_bytes().map_err(|_| KeyProblem::Invalid("the PEM block holds no RSA key"))?;
        let parsed = aws_lc_rs::rsa::PublicKey::from_der(der)
            .map_err(|_| KeyProblem::Invalid("the RSA key inside the PEM block is malformed"))?;
        let bits = parsed.modulus_len() * 8;
        if bits < MIN_RSA_BITS {
            return Err(KeyProblem::Invalid("RSA keys shorter than 2048 bits are not accepted"));
        }
        Ok(Self { key, bits })
    }

    /// The key in the form `jsonwebtoken` verifies with.
    pub fn decoding_key(&self) -> &DecodingKey {
        &self.key
    }

    /// Modulus size, in bits (at least 2048).
    pub fn bits(&self) -> usize {
        self.bits
    }
}

impl std::fmt::Debug for LocalPublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LocalPublicKey(RSA {} bits)", self.bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_blank_and_non_keys() {
        assert_eq!(LocalPublicKey::from_pem("  \n ").unwrap_err(), KeyProblem::Blank);
        assert!(matches!(LocalPublicKey::from_pem("hello").unwrap_err(), KeyProblem::Invalid(_)));
        let garbage = "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----";
        assert!(matches!(LocalPublicKey::from_pem(garbage).unwrap_err(), KeyProblem::Invalid(_)));
        let private = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----";
        assert!(matches!(LocalPublicKey::from_pem(private).unwrap_err(), KeyProblem::Invalid(_)));
    }
}
