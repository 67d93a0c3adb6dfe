//! The values flags take, read as people write them: durations, sizes,
//! counts, watch intervals, URLs. A leaf: the console reads its lines
//! with the same parsers.

use std::time::Duration;
use web_crawler::actors::Millis;
use web_crawler::actors::availability::{WATCH_OFF, check_every};

/// `--limit N`: a count of results or rows, 1 at the least (0 would ask
/// for nothing and print "No results").
pub(super) fn at_least_one(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("0 would show nothing: give 1 or more".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a number")),
    }
}

/// A whole number of 0 or more (`--delay-ms`, `--max-pages`): a negative
/// one is refused with what the flag takes (clap alone would read `-5` as
/// a flag, and advise `-- -5`, which makes it a seed URL).
pub(super) fn whole<T: std::str::FromStr>(text: &str) -> Result<T, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number: give 0 or more"))
}

/// `--concurrency`, `--per-host`: how many requests at once, 1 or more.
pub(super) fn fetches_at_once(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("0 would fetch nothing: give 1 or more".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a whole number: give 1 or more")),
    }
}

/// `--timeout`: seconds a request may take in all, 1 or more.
pub(super) fn timeout_secs(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(0) => Err("0 would stop every request at once: give 1 second or more".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "{text:?} is not a number of seconds: give 1 or more"
        )),
    }
}

/// `--http`'s address: `HOST:PORT`, or a bare `PORT` on loopback.
pub(super) fn http_addr(text: &str) -> Result<std::net::SocketAddr, String> {
    let text = text.trim();
    if let Ok(port) = text.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse()
        .map_err(|_| format!("{text:?} is not an address: give HOST:PORT, or a PORT on loopback"))
}

/// `1GB`, `500MB`, `64KiB`, `1000`: bytes (decimal units, and binary ones with `i`).
pub(super) fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size: try 500MB or 1GB"))?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use KB, MB or GB"
            ));
        }
    };
    number
        .checked_mul(factor)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// A URL's own watch interval as `add_url` reads it: `off` (not watched,
/// not even at --recrawl-every), or a duration of 1s at the least.
pub(super) fn parse_watch(text: &str) -> Result<Millis, String> {
    if text.trim().eq_ignore_ascii_case("off") {
        return Ok(WATCH_OFF);
    }
    check_every(parse_duration(text)?).map_err(|e| e.to_string())
}

/// `500ms`, `90s`, `10min` (or `10m`), `2h`; a bare number is seconds.
pub(super) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration: try 90s, 10min or 1h"))?;
    let seconds = match unit.trim() {
        "ms" => number / 1_000.0,
        "" | "s" | "sec" | "secs" => number,
        "m" | "min" | "mins" => number * 60.0,
        "h" => number * 3_600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use ms, s, min or h"
            ));
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))
}

/// `--webhook`: a URL read as every URL a user gives is
/// ([`web_crawler::normalize::parse_user_url`]).
pub(super) fn user_url(text: &str) -> Result<url::Url, String> {
    web_crawler::normalize::parse_user_url(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_address_is_host_and_port_or_a_port_on_loopback() {
        assert_eq!(http_addr("8080").unwrap().to_string(), "127.0.0.1:8080");
        assert_eq!(http_addr("0.0.0.0:80").unwrap().to_string(), "0.0.0.0:80");
        assert_eq!(http_addr("[::1]:81").unwrap().to_string(), "[::1]:81");
        assert!(http_addr("localhost").unwrap_err().contains("HOST:PORT"));
    }

    #[test]
    fn counts_say_what_they_take() {
        assert_eq!(whole::<u64>("250"), Ok(250));
        assert_eq!(
            whole::<u64>("-5"),
            Err("\"-5\" is not a whole number: give 0 or more".to_string())
        );
        assert_eq!(fetches_at_once("4"), Ok(4));
        assert!(fetches_at_once("0").unwrap_err().contains("give 1 or more"));
        assert!(
            fetches_at_once("abc")
                .unwrap_err()
                .contains("give 1 or more")
        );
        assert_eq!(timeout_secs("30"), Ok(30));
        assert!(timeout_secs("0").unwrap_err().contains("1 second or more"));
    }

    #[test]
    fn durations_read_as_people_write_them() {
        let d = |t| parse_duration(t);
        assert_eq!(d("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(d("90"), Ok(Duration::from_secs(90)));
        assert_eq!(d("10min"), Ok(Duration::from_secs(600)));
        assert_eq!(d("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(d("1.5h"), Ok(Duration::from_secs(5_400)));
        assert_eq!(d("500ms"), Ok(Duration::from_millis(500)));
        assert!(d("soon").unwrap_err().contains("not a duration"));
        assert!(d("3 weeks").unwrap_err().contains("unknown unit"));
        assert!(d("-1s").is_err());
    }
}
