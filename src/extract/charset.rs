//! Sniffing and decoding a response body: whether it is HTML (the
//! Content-Type, or its first bytes when that is missing), which charset it is
//! in (BOM, header, then the WHATWG `<meta>` prescan), and its text as UTF-8.

use encoding_rs::Encoding;

/// How far into the body the `<meta charset>` prescan looks (WHATWG says 1024 bytes).
const PRESCAN_LEN: usize = 1024;

/// Decode a response body to UTF-8: charset from BOM first, then the Content-Type header's
/// charset, then a `<meta charset>` / `<meta http-equiv="Content-Type" content="...charset=...">`
/// prescan of the first 1024 bytes, else UTF-8. Unknown labels fall back to UTF-8 (no panic).
/// Malformed bytes become U+FFFD. Returns the text and the encoding name actually used.
pub fn decode_body(body: &[u8], content_type: Option<&str>) -> (String, &'static str) {
    let (encoding, bom_len) = Encoding::for_bom(body)
        .or_else(|| {
            content_type
                .and_then(content_type_charset)
                .and_then(|label| Encoding::for_label(label.as_bytes()))
                .and_then(usable_encoding)
                .map(|e| (e, 0))
        })
        .or_else(|| prescan(&body[..body.len().min(PRESCAN_LEN)]).map(|e| (e, 0)))
        .unwrap_or((encoding_rs::UTF_8, 0));
    let (text, _had_errors) = encoding.decode_without_bom_handling(&body[bom_len..]);
    (text.into_owned(), encoding.name())
}

/// The WHATWG "replacement" encoding (for labels like iso-2022-kr) would turn the whole page
/// into a single U+FFFD: useless to a crawler, so such labels count as unknown.
fn usable_encoding(e: &'static Encoding) -> Option<&'static Encoding> {
    (e != encoding_rs::REPLACEMENT).then_some(e)
}

/// `charset` parameter of a Content-Type value, unquoted. Parameter names are
/// case-insensitive; the first non-empty charset wins.
fn content_type_charset(content_type: &str) -> Option<&str> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("charset") {
            return None;
        }
        let value = value.trim().trim_matches(|c| c == '"' || c == '\'').trim();
        (!value.is_empty()).then_some(value)
    })
}

/// true if the Content-Type (or, when None, a sniff of the first bytes for "<!doctype html" /
/// "<html") says HTML or XHTML.
pub fn is_html(content_type: Option<&str>, body_start: &[u8]) -> bool {
    if let Some(ct) = content_type {
        let essence = ct.split(';').next().unwrap_or("").trim();
        // An empty header carries no information, so it is treated like a missing one.
        if !essence.is_empty() {
            return essence.eq_ignore_ascii_case("text/html")
                || essence.eq_ignore_ascii_case("application/xhtml+xml");
        }
    }
    sniff_html(body_start)
}

fn sniff_html(bytes: &[u8]) -> bool {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let start = bytes
        .iter()
        .position(|&b| !is_html_ws(b))
        .unwrap_or(bytes.len());
    let rest = &bytes[start..];
    [&b"<!doctype html"[..], b"<html"].iter().any(|pat| {
        // As in the WHATWG sniffing patterns, the tag must end there ("<htmlx" is no match).
        starts_with_ignore_case(rest, pat)
            && rest
                .get(pat.len())
                .is_none_or(|&b| b == b'>' || is_html_ws(b))
    })
}

fn is_html_ws(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\x0C' | b'\r' | b' ')
}

fn starts_with_ignore_case(haystack: &[u8], prefix: &[u8]) -> bool {
    haystack
        .get(..prefix.len())
        .is_some_and(|h| h.eq_ignore_ascii_case(prefix))
}

fn find_ignore_case(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

/// WHATWG "prescan a byte stream to determine its encoding", over an already-truncated slice.
/// Running out of bytes anywhere aborts with None, as the spec does.
fn prescan(b: &[u8]) -> Option<&'static Encoding> {
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"<!--") {
            // The "--" of "<!--" may double as the end ("<!-->"), hence the search from i + 2.
            let end = b[i + 2..].windows(3).position(|w| w == b"-->")?;
            i += 2 + end + 3;
            continue;
        }
        if starts_with_ignore_case(rest, b"<meta")
            && rest.get(5).is_some_and(|&c| is_html_ws(c) || c == b'/')
        {
            i += 5;
            if let Some(enc) = prescan_meta(b, &mut i)? {
                return Some(enc);
            }
        } else if rest.len() >= 2
            && rest[0] == b'<'
            && (rest[1].is_ascii_alphabetic()
                || (rest[1] == b'/' && rest.get(2).is_some_and(u8::is_ascii_alphabetic)))
        {
            // Other tags: skip the name, then their attributes, so that a '<meta' inside an
            // attribute value is not mistaken for a tag.
            i += b[i..].iter().position(|&c| is_html_ws(c) || c == b'>')?;
            while prescan_attribute(b, &mut i).ok()?.is_some() {}
        } else if rest.starts_with(b"<!") || rest.starts_with(b"</") || rest.starts_with(b"<?") {
            i += 2 + b[i + 2..].iter().position(|&c| c == b'>')?;
        }
        i += 1;
    }
    None
}

/// The `<meta` branch of the prescan, with `i` just after "<meta". Outer None: ran out of
/// bytes (abort the prescan). Inner None: this meta declares nothing usable, keep scanning.
fn prescan_meta(b: &[u8], i: &mut usize) -> Option<Option<&'static Encoding>> {
    let (mut seen_http_equiv, mut seen_content, mut seen_charset) = (false, false, false);
    let mut got_pragma = false;
    let mut need_pragma: Option<bool> = None;
    // None: no charset seen yet; Some(None): a charset attribute with an unknown label.
    let mut charset: Option<Option<&'static Encoding>> = None;
    while let Some((name, value)) = prescan_attribute(b, i).ok()? {
        // Only the first occurrence of an attribute name counts.
        match name.as_slice() {
            b"http-equiv" if !seen_http_equiv => {
                seen_http_equiv = true;
                got_pragma |= value == b"content-type";
            }
            b"content" if !seen_content => {
                seen_content = true;
                if charset.is_none()
                    && let Some(enc) = charset_from_meta_content(&value)
                {
                    charset = Some(Some(enc));
                    need_pragma = Some(true);
                }
            }
            b"charset" if !seen_charset => {
                seen_charset = true;
                charset = Some(Encoding::for_label(&value));
                need_pragma = Some(false);
            }
            _ => {}
        }
    }
    let declared = match need_pragma {
        None => None,
        Some(true) if !got_pragma => None,
        Some(_) => charset.flatten(),
    };
    Some(declared.and_then(|enc| {
        // A byte-level ASCII prescan cannot have found a UTF-16 page: the spec maps it to
        // UTF-8, and x-user-defined to windows-1252.
        if enc == encoding_rs::UTF_16LE || enc == encoding_rs::UTF_16BE {
            Some(encoding_rs::UTF_8)
        } else if enc == encoding_rs::X_USER_DEFINED {
            Some(encoding_rs::WINDOWS_1252)
        } else {
            usable_encoding(enc)
        }
    }))
}

/// Lower-cased (name, value) of an attribute seen by the prescan.
type PrescanAttr = (Vec<u8>, Vec<u8>);

/// WHATWG "get an attribute" for the prescan: names and values are ASCII-lowercased.
/// Ok(None) when the tag ends at '>' (position left on it); Err when out of bytes.
fn prescan_attribute(b: &[u8], i: &mut usize) -> Result<Option<PrescanAttr>, ()> {
    let at = |i: usize| b.get(i).copied().ok_or(());
    while is_html_ws(at(*i)?) || at(*i)? == b'/' {
        *i += 1;
    }
    if at(*i)? == b'>' {
        return Ok(None);
    }
    let mut name = Vec::new();
    let mut value = Vec::new();
    let mut saw_equals = false;
    loop {
        let c = at(*i)?;
        if c == b'=' && !name.is_empty() {
            *i += 1;
            saw_equals = true;
            break;
        }
        if is_html_ws(c) {
            break;
        }
        if c == b'/' || c == b'>' {
            return Ok(Some((name, value)));
        }
        name.push(c.to_ascii_lowercase());
        *i += 1;
    }
    if !saw_equals {
        while is_html_ws(at(*i)?) {
            *i += 1;
        }
        if at(*i)? != b'=' {
            return Ok(Some((name, value)));
        }
        *i += 1;
    }
    while is_html_ws(at(*i)?) {
        *i += 1;
    }
    let c = at(*i)?;
    if c == b'"' || c == b'\'' {
        loop {
            *i += 1;
            let d = at(*i)?;
            if d == c {
                *i += 1;
                return Ok(Some((name, value)));
            }
            value.push(d.to_ascii_lowercase());
        }
    }
    if c == b'>' {
        return Ok(Some((name, value)));
    }
    loop {
        let c = at(*i)?;
        if is_html_ws(c) || c == b'>' {
            return Ok(Some((name, value)));
        }
        value.push(c.to_ascii_lowercase());
        *i += 1;
    }
}

/// WHATWG "extract a character encoding from a meta element" (the `content` attribute).
fn charset_from_meta_content(s: &[u8]) -> Option<&'static Encoding> {
    let mut i = 0;
    loop {
        i += find_ignore_case(&s[i..], b"charset")? + b"charset".len();
        while s.get(i).is_some_and(|&c| is_html_ws(c)) {
            i += 1;
        }
        if s.get(i) != Some(&b'=') {
            continue;
        }
        i += 1;
        while s.get(i).is_some_and(|&c| is_html_ws(c)) {
            i += 1;
        }
        let first = *s.get(i)?;
        if first == b'"' || first == b'\'' {
            let len = s[i + 1..].iter().position(|&c| c == first)?;
            return Encoding::for_label(&s[i + 1..i + 1 + len]);
        }
        let len = s[i..]
            .iter()
            .position(|&c| is_html_ws(c) || c == b';')
            .unwrap_or(s.len() - i);
        return Encoding::for_label(&s[i..i + len]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "Привет" in windows-1251.
    const PRIVET_1251: &[u8] = b"\xCF\xF0\xE8\xE2\xE5\xF2";
    /// "日本語" in Shift_JIS.
    const NIHONGO_SJIS: &[u8] = b"\x93\xFA\x96\x7B\x8C\xEA";

    fn with(prefix: &[u8], body: &[u8], suffix: &[u8]) -> Vec<u8> {
        [prefix, body, suffix].concat()
    }

    #[test]
    fn decode_utf8_default() {
        let (s, enc) = decode_body("<p>héllo</p>".as_bytes(), None);
        assert_eq!((s.as_str(), enc), ("<p>héllo</p>", "UTF-8"));
        assert_eq!(decode_body(b"", None), (String::new(), "UTF-8"));
        assert_eq!(
            decode_body(b"", Some("text/html")),
            (String::new(), "UTF-8")
        );
    }

    #[test]
    fn decode_windows_1251_via_header_and_meta() {
        let body = with(b"<p>", PRIVET_1251, b"</p>");
        let (s, enc) = decode_body(&body, Some("text/html; charset=windows-1251"));
        assert_eq!((s.as_str(), enc), ("<p>Привет</p>", "windows-1251"));
        // Quoted, odd case and spacing.
        let (s, enc) = decode_body(&body, Some("Text/HTML;Charset = \"CP1251\""));
        assert_eq!((s.as_str(), enc), ("<p>Привет</p>", "windows-1251"));

        let body = with(
            b"<html><head><meta charset=\"windows-1251\"></head><p>",
            PRIVET_1251,
            b"",
        );
        let (s, enc) = decode_body(&body, Some("text/html"));
        assert!(s.ends_with("<p>Привет"), "{s}");
        assert_eq!(enc, "windows-1251");
        // Cross-check with encoding_rs's own encoder on a longer text.
        let (bytes, _, _) = encoding_rs::WINDOWS_1251.encode("Съешь же ещё этих мягких булок");
        let body = with(b"<meta charset=cp1251>", &bytes, b"");
        let (s, _) = decode_body(&body, None);
        assert_eq!(s, "<meta charset=cp1251>Съешь же ещё этих мягких булок");
    }

    #[test]
    fn decode_shift_jis_via_header_and_meta() {
        let body = with(b"<p>", NIHONGO_SJIS, b"</p>");
        let (s, enc) = decode_body(&body, Some("text/html; charset=Shift_JIS"));
        assert_eq!((s.as_str(), enc), ("<p>日本語</p>", "Shift_JIS"));

        let body = with(
            b"<!DOCTYPE html><HEAD><META HTTP-EQUIV=\"Content-Type\" \
              CONTENT=\"text/html; charset=shift_jis\"></HEAD><p>",
            NIHONGO_SJIS,
            b"",
        );
        let (s, enc) = decode_body(&body, None);
        assert!(s.ends_with("<p>日本語"), "{s}");
        assert_eq!(enc, "Shift_JIS");
        // x-sjis label, single quotes inside content.
        let body = with(
            b"<meta http-equiv=content-type content=\"text/html;charset='x-sjis'\">",
            NIHONGO_SJIS,
            b"",
        );
        assert_eq!(decode_body(&body, None).1, "Shift_JIS");
    }

    #[test]
    fn decode_precedence() {
        let meta_1251 = with(b"<meta charset=windows-1251>", PRIVET_1251, b"");
        // Header beats meta.
        let (s, enc) = decode_body(&meta_1251, Some("text/html; charset=koi8-r"));
        assert_eq!(enc, "KOI8-R");
        assert!(!s.contains("Привет"));
        // BOM beats header and meta, and is stripped.
        let body = with(b"\xEF\xBB\xBF", "<p>é</p>".as_bytes(), b"");
        assert_eq!(
            decode_body(&body, Some("text/html; charset=windows-1251")),
            ("<p>é</p>".to_owned(), "UTF-8")
        );
        let utf16: Vec<u8> = "\u{FEFF}<p>hi</p>"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        assert_eq!(
            decode_body(&utf16, Some("text/html; charset=utf-8")),
            ("<p>hi</p>".to_owned(), "UTF-16LE")
        );
        // Unknown header label: fall through to meta.
        let (s, enc) = decode_body(&meta_1251, Some("text/html; charset=no-such-charset"));
        assert_eq!(enc, "windows-1251");
        assert!(s.ends_with("Привет"));
        // Replacement-encoding labels count as unknown.
        assert_eq!(
            decode_body(b"<p>x</p>", Some("text/html; charset=iso-2022-kr")).1,
            "UTF-8"
        );
        // latin1 means windows-1252 on the web.
        assert_eq!(
            decode_body(b"caf\xe9", Some("text/html; charset=ISO-8859-1")),
            ("café".to_owned(), "windows-1252")
        );
    }

    #[test]
    fn decode_meta_prescan_rules() {
        // Unknown meta label → UTF-8.
        assert_eq!(decode_body(b"<meta charset=klingon><p>x", None).1, "UTF-8");
        // content charset without http-equiv is ignored.
        assert_eq!(
            decode_body(b"<meta content='text/html; charset=koi8-r'>", None).1,
            "UTF-8"
        );
        // Meta inside a comment is ignored; the next one counts.
        assert_eq!(
            decode_body(
                b"<!-- <meta charset=koi8-r> --><meta charset=windows-1251>",
                None
            )
            .1,
            "windows-1251"
        );
        // "<meta" inside another tag's attribute value is not a tag.
        assert_eq!(
            decode_body(
                b"<div title='<meta charset=koi8-r>'><meta charset=gbk>",
                None
            )
            .1,
            "GBK"
        );
        // Beyond the first 1024 bytes: not seen.
        let mut late = vec![b' '; 1100];
        late.extend_from_slice(b"<meta charset=windows-1251>");
        assert_eq!(decode_body(&late, None).1, "UTF-8");
        // A meta cut off by the 1024-byte limit aborts the prescan.
        let mut cut = vec![b' '; 1010];
        cut.extend_from_slice(b"<meta charset=windows-1251>");
        assert_eq!(decode_body(&cut, None).1, "UTF-8");
        // UTF-16 declared in meta means UTF-8; x-user-defined means windows-1252.
        assert_eq!(decode_body(b"<meta charset=utf-16le>", None).1, "UTF-8");
        assert_eq!(
            decode_body(b"<meta charset=x-user-defined>", None).1,
            "windows-1252"
        );
        // <meta/charset=...> and unquoted attributes.
        assert_eq!(decode_body(b"<meta/charset=euc-jp>", None).1, "EUC-JP");
        // First charset attribute wins.
        assert_eq!(
            decode_body(b"<meta charset=gbk charset=koi8-r>", None).1,
            "GBK"
        );
        // Other tags and doctypes are skipped.
        assert_eq!(
            decode_body(
                b"<!DOCTYPE html><?xml x?><html lang=en><meta charset=big5>",
                None
            )
            .1,
            "Big5"
        );
        // Garbage never panics.
        for junk in [
            &b"<meta"[..],
            b"<meta ",
            b"<meta charset",
            b"<meta charset=\"",
            b"<!--",
            b"<a",
            b"</",
        ] {
            assert_eq!(decode_body(junk, None).1, "UTF-8");
        }
    }

    #[test]
    fn is_html_checks() {
        assert!(is_html(Some("text/html"), b""));
        assert!(is_html(Some("Text/HTML; charset=utf-8"), b""));
        assert!(is_html(Some("application/xhtml+xml"), b""));
        assert!(!is_html(Some("text/plain"), b"<!doctype html>"));
        assert!(!is_html(Some("application/json"), b"<html>"));
        assert!(!is_html(Some("text/htmlx"), b""));
        assert!(!is_html(Some("image/png"), b"\x89PNG"));
        // Sniffing when the header is absent (or empty).
        assert!(is_html(
            None,
            b"<!DOCTYPE HTML PUBLIC \"-//W3C//DTD HTML 4.01//EN\">"
        ));
        assert!(is_html(None, b"<!doctype html>"));
        assert!(is_html(None, b"\xEF\xBB\xBF \r\n\t<HTML lang=en>"));
        assert!(is_html(None, b"<html>"));
        assert!(is_html(None, b"<html"));
        assert!(is_html(Some(""), b"<html>"));
        assert!(!is_html(None, b"<htmlx>"));
        assert!(!is_html(None, b"<?xml version=\"1.0\"?><rss>"));
        assert!(!is_html(None, b"{\"a\": 1}"));
        assert!(!is_html(None, b""));
        assert!(!is_html(None, b"hello <html>"));
    }
}
