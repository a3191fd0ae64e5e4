//! Which addresses a request may be connected to: public ones, and the ranges the operator
//! allows explicitly (`--egress-allow-private 10.0.0.0/8,...`). Every address a name resolves
//! to is checked, and the connection is made to the checked addresses only.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// The ranges that are not the public internet: this host, private networks, link-local
/// (cloud metadata at 169.254.169.254 and fd00:ec2::254 among them), shared, reserved,
/// documentation and multicast ranges.
const NOT_PUBLIC: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "::/128",
    "::1/128",
    "64:ff9b:1::/48",
    "100::/64",
    "2001::/23",
    "2001:db8::/32",
    "2002::/16",
    "fc00::/7",
    "fe80::/10",
    "ff00::/8",
];

/// Whether `ip` is on the public internet. An IPv4 address mapped, translated or compatible
/// in IPv6 (see [`embedded_v4`]) is judged as the IPv4 address it carries.
pub fn is_public(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    };
    !NOT_PUBLIC
        .iter()
        .map(|n| n.parse::<IpNet>().expect("a valid range"))
        .any(|n| n.contains(&ip))
}

/// The IPv4 address an IPv6 address carries in its last 32 bits, where a translator on the
/// way (SIIT, 464XLAT, NAT64) or the host's own stack may deliver it to that IPv4 address:
/// mapped `::ffff:a.b.c.d` (`::ffff:0:0/96`), translated `::ffff:0:a.b.c.d`
/// (`::ffff:0:0:0/96`), compatible `::a.b.c.d` (`::/96`, deprecated) and NAT64's
/// `64:ff9b::a.b.c.d`. `::` and `::1` are in `::/96` but are IPv6's own unspecified and
/// loopback addresses, judged (and allowed by an operator) as themselves.
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let carries = match s[..6] {
        [0, 0, 0, 0, 0, 0xffff] | [0, 0, 0, 0, 0xffff, 0] | [0x64, 0xff9b, 0, 0, 0, 0] => true,
        [0, 0, 0, 0, 0, 0] => !(v6.is_unspecified() || v6.is_loopback()),
        _ => false,
    };
    let o = v6.octets();
    carries.then(|| Ipv4Addr::new(o[12], o[13], o[14], o[15]))
}

/// The address rule of a server: public addresses, and these ranges besides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressRules {
    allow_private: Vec<IpNet>,
}

impl AddressRules {
    /// Public addresses, and `allow_private`'s ranges.
    pub fn new(allow_private: Vec<IpNet>) -> AddressRules {
        AddressRules { allow_private }
    }

    /// Parses `--egress-allow-private` (comma-separated CIDRs or single addresses).
    pub fn parse_csv(text: &str) -> Result<AddressRules, String> {
        let mut nets = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let net = match item.parse::<IpNet>() {
                Ok(n) => n,
                Err(_) => match item.parse::<IpAddr>() {
                    Ok(ip) => IpNet::from(ip),
                    Err(_) => return Err(format!("{item:?} is not an address or a CIDR range")),
                },
            };
            nets.push(net);
        }
        Ok(AddressRules::new(nets))
    }

    /// Whether a connection to `ip` is allowed.
    pub fn permits(&self, ip: IpAddr) -> bool {
        let mapped = match ip {
            IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        is_public(ip) || self.allow_private.iter().any(|n| n.contains(&mapped))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_loopback_link_local_and_metadata_addresses_are_not_public() {
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.20.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "224.0.0.1",
        ] {
            assert!(!is_public(a.parse().unwrap()), "{a}");
        }
        for a in ["93.184.216.34", "1.1.1.1", "2606:4700::1111"] {
            assert!(is_public(a.parse().unwrap()), "{a}");
        }
    }

    #[test]
    fn ipv4_compatible_and_translated_addresses_are_judged_as_the_ipv4_they_carry() {
        // `::/96` and `::ffff:0:0:0/96` reach the IPv4 address through a translator.
        for a in [
            "::127.0.0.2",
            "::10.0.0.1",
            "::169.254.169.254",
            "::ffff:0:127.0.0.2",
            "::ffff:0:10.1.2.3",
            "::ffff:0:169.254.169.254",
        ] {
            assert!(!is_public(a.parse().unwrap()), "{a}");
        }
        for a in ["::93.184.216.34", "::ffff:0:1.1.1.1"] {
            assert!(is_public(a.parse().unwrap()), "{a}");
        }
        // The operator's IPv4 ranges let them through as they do the IPv4 address itself.
        let r = AddressRules::parse_csv("127.0.0.0/8").unwrap();
        assert!(r.permits("::127.0.0.2".parse().unwrap()));
        assert!(r.permits("::ffff:0:127.0.0.2".parse().unwrap()));
        assert!(!r.permits("::10.0.0.1".parse().unwrap()));
        // `::` and `::1` are themselves: not public, and allowed by their own ranges.
        for a in ["::", "::1"] {
            assert!(!is_public(a.parse().unwrap()), "{a}");
        }
        let r = AddressRules::parse_csv("::1").unwrap();
        assert!(r.permits("::1".parse().unwrap()));
        assert!(!r.permits("::".parse().unwrap()));
        assert!(
            !AddressRules::parse_csv("0.0.0.0/8")
                .unwrap()
                .permits("::1".parse().unwrap())
        );
    }

    #[test]
    fn the_operator_allows_ranges_explicitly() {
        let r = AddressRules::parse_csv("127.0.0.1, 10.0.0.0/8").unwrap();
        assert!(r.permits("127.0.0.1".parse().unwrap()));
        assert!(r.permits("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!r.permits("127.0.0.2".parse().unwrap()));
        assert!(r.permits("10.9.9.9".parse().unwrap()));
        assert!(!r.permits("192.168.0.1".parse().unwrap()));
        assert!(AddressRules::parse_csv("nope").is_err());
    }
}
