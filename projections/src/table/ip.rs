//! IP addresses in a dataset's document index: every address as the 128-bit number of its IPv6
//! form (an IPv4 address mapped, `::ffff:a.b.c.d`), written as 32 hex digits so that their
//! order as strings is their order as numbers. Ranges, CIDR blocks and `ip_range` aggregations
//! are ranges of these.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The 128-bit number of an address (IPv4 mapped into IPv6).
pub fn number(text: &str) -> Option<u128> {
    let address: IpAddr = text.trim().parse().ok()?;
    Some(match address {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    })
}

/// An address's sortable form in the document index.
pub fn sortable(number: u128) -> String {
    format!("{number:032x}")
}

/// An address as Elasticsearch prints it: IPv4 dotted (mapped addresses too), IPv6 as RFC 5952
/// says.
pub fn display(number: u128) -> String {
    let v6 = Ipv6Addr::from(number);
    match v6.to_ipv4_mapped() {
        Some(v4) => v4.to_string(),
        None => v6.to_string(),
    }
}

/// The first and last address of a CIDR block (`192.168.0.0/16`, `2001:db8::/32`); an IPv4
/// prefix counts within the IPv4 addresses.
pub fn block(text: &str) -> Option<(u128, u128)> {
    let (address, prefix) = text.trim().split_once('/')?;
    let prefix: u32 = prefix.parse().ok()?;
    let (number, bits) = match address.parse::<IpAddr>().ok()? {
        IpAddr::V4(v4) => (u128::from(v4.to_ipv6_mapped()), prefix.checked_add(96)?),
        IpAddr::V6(v6) => (u128::from(v6), prefix),
    };
    if bits > 128 || (address.parse::<Ipv4Addr>().is_ok() && prefix > 32) {
        return None;
    }
    let host = match bits {
        128 => 0,
        bits => u128::MAX >> bits,
    };
    Some((number & !host, number | host))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_order_as_numbers_and_print_as_elasticsearch_prints_them() {
        let one = number("192.168.0.1").unwrap();
        let seven = number("192.168.0.7").unwrap();
        let loopback = number("::1").unwrap();
        assert!(sortable(loopback) < sortable(one) && sortable(one) < sortable(seven));
        assert_eq!(display(one), "192.168.0.1");
        assert_eq!(display(loopback), "::1");
        assert_eq!(display(number("0:0:0:0:0:0:0:1").unwrap()), "::1");
        assert_eq!(number("not an ip"), None);
        assert_eq!(number(":::1"), None);
    }

    #[test]
    fn blocks_span_their_addresses() {
        let (lo, hi) = block("192.168.0.0/16").unwrap();
        assert_eq!(
            (display(lo), display(hi)),
            ("192.168.0.0".into(), "192.168.255.255".into())
        );
        let (lo, hi) = block("::/24").unwrap();
        assert_eq!(
            (display(lo), display(hi + 1)),
            ("::".into(), "0:100::".into())
        );
        assert_eq!(block("10.0.0.1/32").map(|(l, h)| l == h), Some(true));
        assert_eq!(block("10.0.0.0/33"), None);
        assert_eq!(block("10.0.0.0"), None);
    }
}
