//! The checksums the personal-data rules (`vivarium.toml`) validate a match with, so that a
//! number that merely looks like a card number or an IBAN is not one.

/// Whether `s` (digits, possibly grouped by spaces or hyphens) is 13 to 19 digits passing the
/// Luhn check.
pub fn luhn(s: &[u8]) -> bool {
    let digits: Vec<u32> = s
        .iter()
        .filter(|b| b.is_ascii_digit())
        .map(|b| u32::from(b - b'0'))
        .collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 1 {
                let d2 = d * 2;
                if d2 > 9 { d2 - 9 } else { d2 }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// IBAN lengths by country, from SWIFT's IBAN registry.
const IBAN_LENGTHS: &[(&[u8; 2], usize)] = &[
    (b"AD", 24),
    (b"AE", 23),
    (b"AL", 28),
    (b"AT", 20),
    (b"AZ", 28),
    (b"BA", 20),
    (b"BE", 16),
    (b"BG", 22),
    (b"BH", 22),
    (b"BR", 29),
    (b"BY", 28),
    (b"CH", 21),
    (b"CR", 22),
    (b"CY", 28),
    (b"CZ", 24),
    (b"DE", 22),
    (b"DK", 18),
    (b"DO", 28),
    (b"EE", 20),
    (b"EG", 29),
    (b"ES", 24),
    (b"FI", 18),
    (b"FO", 18),
    (b"FR", 27),
    (b"GB", 22),
    (b"GE", 22),
    (b"GI", 23),
    (b"GL", 18),
    (b"GR", 27),
    (b"GT", 28),
    (b"HR", 21),
    (b"HU", 28),
    (b"IE", 22),
    (b"IL", 23),
    (b"IQ", 23),
    (b"IS", 26),
    (b"IT", 27),
    (b"JO", 30),
    (b"KW", 30),
    (b"KZ", 20),
    (b"LB", 28),
    (b"LC", 32),
    (b"LI", 21),
    (b"LT", 20),
    (b"LU", 20),
    (b"LV", 21),
    (b"MC", 27),
    (b"MD", 24),
    (b"ME", 22),
    (b"MK", 19),
    (b"MR", 27),
    (b"MT", 31),
    (b"MU", 30),
    (b"NL", 18),
    (b"NO", 15),
    (b"PK", 24),
    (b"PL", 28),
    (b"PS", 29),
    (b"PT", 25),
    (b"QA", 29),
    (b"RO", 24),
    (b"RS", 22),
    (b"SA", 24),
    (b"SC", 31),
    (b"SE", 24),
    (b"SI", 19),
    (b"SK", 24),
    (b"SM", 27),
    (b"ST", 25),
    (b"SV", 28),
    (b"TL", 23),
    (b"TN", 24),
    (b"TR", 26),
    (b"UA", 29),
    (b"VA", 22),
    (b"VG", 24),
    (b"XK", 20),
];

/// Whether `s` (compact, or grouped by single spaces) is an IBAN of a registered country with
/// that country's length and a valid ISO 13616 check (the number mod 97 is 1).
pub fn iban(s: &[u8]) -> bool {
    let compact: Vec<u8> = s.iter().copied().filter(|&b| b != b' ').collect();
    let Some(&(_, len)) = IBAN_LENGTHS.iter().find(|(c, _)| compact.starts_with(*c)) else {
        return false;
    };
    if compact.len() != len {
        return false;
    }
    // Move the first four characters to the end; letters count as 10..35.
    let mut rem: u32 = 0;
    for &b in compact[4..].iter().chain(&compact[..4]) {
        let v = match b {
            b'0'..=b'9' => u32::from(b - b'0'),
            b'A'..=b'Z' => u32::from(b - b'A') + 10,
            _ => return false,
        };
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    rem == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luhn_accepts_test_cards_and_refuses_neighbours() {
        for ok in [
            "4111111111111111",
            "5500 0000 0000 0004",
            "3782-822463-10005",
        ] {
            assert!(luhn(ok.as_bytes()), "{ok}");
        }
        for bad in ["4111111111111112", "411111111111", "41111111111111111111"] {
            assert!(!luhn(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn iban_checks_length_and_mod_97() {
        for ok in [
            "DE89370400440532013000",
            "GB82 WEST 1234 5698 7654 32",
            "NO9386011117947",
        ] {
            assert!(iban(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "DE89370400440532013001",
            "DE8937040044053201300",
            "ZZ89370400440532013000",
        ] {
            assert!(!iban(bad.as_bytes()), "{bad}");
        }
    }
}
