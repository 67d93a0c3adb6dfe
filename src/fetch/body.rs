//! Response bodies: read frame by frame under the read timeout, capped in
//! raw and decoded size, and decoded (gzip, deflate, br) as they stream in.

use std::io::{self, Write};
use std::time::Duration;

use brotli::DecompressorWriter;
use flate2::write::{DeflateDecoder, GzDecoder, ZlibDecoder};
use http_body_util::BodyExt;
use hyper::body::{Body, Incoming};
use hyper::header::{self, HeaderMap};
use tokio::time::{Instant, timeout_at};

use super::{FetchError, error_message, timeout};

/// Bytes of a body's declared length reserved before it arrives, at most.
const PRESIZE_MAX: usize = 1 << 20;

/// Output buffer of the brotli decoder; it also bounds how far the decoder
/// runs past the cap before the sink refuses more.
const BROTLI_BUFFER: usize = 32 * 1024;

/// Reads and decodes `body`, keeping at most `max_body` bytes both raw and
/// decoded. Each frame is waited for at most `read_timeout`, and never past
/// `deadline` (the whole call's). Returns the body and whether it was cut.
pub(super) async fn read_body(
    mut body: Incoming,
    headers: &HeaderMap,
    max_body: usize,
    read_timeout: Duration,
    deadline: Instant,
) -> Result<(Vec<u8>, bool), FetchError> {
    let coding = content_coding(headers);
    let mut decoder = BodyDecoder::new(coding, max_body);
    // hyper's size hint is the body's `Content-Length` when it has one.
    if coding == Coding::Identity
        && let Some(len) = body.size_hint().exact()
    {
        // The whole body in one allocation: grown by doubling, a 30 KB page
        // was copied twice on its way in. Up to a bound, as the header may
        // promise what never comes.
        decoder.reserve(
            usize::try_from(len)
                .unwrap_or(usize::MAX)
                .min(max_body)
                .min(PRESIZE_MAX),
        );
    }
    let mut raw_len = 0usize;
    let mut truncated = false;
    loop {
        let frame_deadline = deadline.min(Instant::now() + read_timeout);
        let frame = match timeout_at(frame_deadline, body.frame()).await {
            Err(_) => return Err(timeout(frame_deadline, deadline, "body")),
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(FetchError::Protocol(error_message(&e))),
            Ok(Some(Ok(frame))) => frame,
        };
        // Trailers carry nothing we keep.
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let take = data.len().min(max_body - raw_len);
        raw_len += take;
        if decoder.feed(&data[..take])? || take < data.len() {
            truncated = true;
            break;
        }
    }
    // Dropping an unfinished body closes the connection instead of
    // returning it to the pool, so the rest is never read.
    drop(body);
    let (decoded, cut) = decoder.finish(truncated)?;
    Ok((decoded, truncated || cut))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coding {
    Identity,
    Gzip,
    Deflate,
    Brotli,
}

/// The body's content coding. Only a single coding is undone; a stack of
/// several (rare, usually a misconfiguration) is left as is, like an unknown one.
fn content_coding(headers: &HeaderMap) -> Coding {
    let mut codings = Vec::new();
    for value in headers.get_all(header::CONTENT_ENCODING) {
        for token in String::from_utf8_lossy(value.as_bytes()).split(',') {
            let token = token.trim().to_ascii_lowercase();
            if !token.is_empty() && token != "identity" {
                codings.push(token);
            }
        }
    }
    match codings.as_slice() {
        [one] => match one.as_str() {
            "gzip" | "x-gzip" => Coding::Gzip,
            "deflate" => Coding::Deflate,
            "br" => Coding::Brotli,
            _ => Coding::Identity,
        },
        _ => Coding::Identity,
    }
}

/// Whether a body with these headers comes out of the fetcher decoded (its
/// `Content-Encoding` undone), so that an archive can say so.
pub(crate) fn is_decoded(headers: &HeaderMap) -> bool {
    !matches!(content_coding(headers), Coding::Identity)
}

/// Collects decoded bytes up to a cap. Once full, a write fails instead of
/// returning 0, so decoders stop at once (brotli's write loop would spin on 0).
#[derive(Default)]
struct CappedSink {
    buf: Vec<u8>,
    cap: usize,
    overflowed: bool,
}

impl CappedSink {
    fn new(cap: usize) -> Self {
        CappedSink {
            buf: Vec::new(),
            cap,
            overflowed: false,
        }
    }

    /// Takes the bytes out and refuses everything after, since decoders flush
    /// once more when dropped.
    fn take(&mut self) -> Vec<u8> {
        self.cap = 0;
        std::mem::take(&mut self.buf)
    }
}

impl Write for CappedSink {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        let room = self.cap.saturating_sub(self.buf.len());
        if room == 0 {
            self.overflowed = true;
            return Err(io::Error::other("decoded body reached the size cap"));
        }
        let n = data.len().min(room);
        let need = self.buf.len() + n;
        if need > self.buf.capacity() {
            // Grow by doubling like Vec, but never past the cap, so a capped
            // body never holds more than `cap` bytes of memory.
            let target = (self.buf.capacity() * 2)
                .max(8 * 1024)
                .min(self.cap)
                .max(need);
            self.buf.reserve_exact(target - self.buf.len());
        }
        self.buf.extend_from_slice(&data[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

enum DecodeState {
    Plain(CappedSink),
    /// "deflate" is zlib-wrapped per the RFC, but many servers send raw
    /// deflate; the first two bytes tell which.
    DeflateSniff {
        head: Vec<u8>,
        sink: CappedSink,
    },
    Gzip(GzDecoder<CappedSink>),
    Zlib(ZlibDecoder<CappedSink>),
    RawDeflate(DeflateDecoder<CappedSink>),
    Brotli(Box<DecompressorWriter<CappedSink>>),
}

/// Streaming body decoder with the decoded-size cap applied while decoding.
struct BodyDecoder {
    state: DecodeState,
    fed_any: bool,
    /// The compressed stream has ended; anything after it is ignored.
    ended: bool,
}

impl BodyDecoder {
    fn new(coding: Coding, cap: usize) -> Self {
        let sink = CappedSink::new(cap);
        let state = match coding {
            Coding::Identity => DecodeState::Plain(sink),
            Coding::Gzip => DecodeState::Gzip(GzDecoder::new(sink)),
            Coding::Deflate => DecodeState::DeflateSniff {
                head: Vec::new(),
                sink,
            },
            Coding::Brotli => {
                DecodeState::Brotli(Box::new(DecompressorWriter::new(sink, BROTLI_BUFFER)))
            }
        };
        BodyDecoder {
            state,
            fed_any: false,
            ended: false,
        }
    }

    /// Room for `bytes` of an identity-coded body.
    fn reserve(&mut self, bytes: usize) {
        if let DecodeState::Plain(sink) = &mut self.state {
            sink.buf.reserve_exact(bytes);
        }
    }

    fn writer(&mut self) -> &mut dyn Write {
        match &mut self.state {
            DecodeState::Plain(s) | DecodeState::DeflateSniff { sink: s, .. } => s,
            DecodeState::Gzip(d) => d,
            DecodeState::Zlib(d) => d,
            DecodeState::RawDeflate(d) => d,
            DecodeState::Brotli(d) => d.as_mut(),
        }
    }

    fn sink(&mut self) -> &mut CappedSink {
        match &mut self.state {
            DecodeState::Plain(s) | DecodeState::DeflateSniff { sink: s, .. } => s,
            DecodeState::Gzip(d) => d.get_mut(),
            DecodeState::Zlib(d) => d.get_mut(),
            DecodeState::RawDeflate(d) => d.get_mut(),
            DecodeState::Brotli(d) => d.get_mut(),
        }
    }

    /// Feeds raw body bytes. Returns true once the decoded cap is reached,
    /// after which the caller should stop reading.
    fn feed(&mut self, mut data: &[u8]) -> Result<bool, FetchError> {
        if self.ended || data.is_empty() {
            return Ok(false);
        }
        self.fed_any = true;
        if let DecodeState::DeflateSniff { head, sink } = &mut self.state {
            head.extend_from_slice(data);
            if head.len() < 2 {
                return Ok(false);
            }
            let head = std::mem::take(head);
            let sink = std::mem::take(sink);
            self.state = if is_zlib_header(head[0], head[1]) {
                DecodeState::Zlib(ZlibDecoder::new(sink))
            } else {
                DecodeState::RawDeflate(DeflateDecoder::new(sink))
            };
            return self.feed(&head);
        }
        let brotli = matches!(self.state, DecodeState::Brotli(_));
        while !data.is_empty() {
            match self.writer().write(data) {
                // The decoders accept nothing past the end of their stream.
                Ok(0) => {
                    self.ended = true;
                    break;
                }
                Ok(n) => {
                    // brotli consumes everything it can, so a short write
                    // also means its stream has ended.
                    if brotli && n < data.len() {
                        self.ended = true;
                        break;
                    }
                    data = &data[n..];
                }
                Err(_) if self.sink().overflowed => return Ok(true),
                Err(e) => return Err(FetchError::Decode(e.to_string())),
            }
        }
        Ok(false)
    }

    /// Flushes the decoder and returns the body and whether the decoded cap
    /// cut it. A stream we cut ourselves (`raw_truncated`) cannot end cleanly,
    /// so its errors are ignored.
    fn finish(mut self, raw_truncated: bool) -> Result<(Vec<u8>, bool), FetchError> {
        // An empty body (HEAD-like statuses, 204, 304) is fine whatever the
        // Content-Encoding says.
        let result = if !self.fed_any {
            Ok(())
        } else {
            match &mut self.state {
                DecodeState::Plain(_) => Ok(()),
                DecodeState::DeflateSniff { .. } => Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "deflate stream shorter than 2 bytes",
                )),
                DecodeState::Gzip(d) => d.try_finish(),
                DecodeState::Zlib(d) => d.try_finish(),
                DecodeState::RawDeflate(d) => d.try_finish(),
                DecodeState::Brotli(d) => d.close(),
            }
        };
        let overflowed = self.sink().overflowed;
        if let Err(e) = result
            && !overflowed
            && !raw_truncated
        {
            return Err(FetchError::Decode(e.to_string()));
        }
        Ok((self.sink().take(), overflowed))
    }
}

/// RFC 1950 header: compression method 8 and a header checksum divisible by 31.
fn is_zlib_header(cmf: u8, flg: u8) -> bool {
    cmf & 0x0f == 8 && cmf >> 4 <= 7 && (u16::from(cmf) << 8 | u16::from(flg)) % 31 == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch::FetchConfig;
    use crate::fetch::testing::{fetcher, fetcher_with, test_config};
    use web_crawler_testsupport::raw::RawServer;
    use web_crawler_testsupport::{Page, serve, url_for};

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn page() -> Vec<u8> {
        b"<html><body>hello crawler</body></html>".repeat(200)
    }

    #[tokio::test]
    async fn gzip_body_is_decoded() {
        let server =
            serve(|_| Page::new(200, &[("content-encoding", "gzip")], gzip(&page()))).await;
        let resp = fetcher().get(&server.parsed_url("/")).await.unwrap();
        assert_eq!(resp.body, page());
        assert!(!resp.truncated);
    }

    #[tokio::test]
    async fn deflate_zlib_and_raw_are_decoded() {
        let server = serve(|req| {
            let body = if req.uri().path() == "/zlib" {
                let mut e =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(&page()).unwrap();
                e.finish().unwrap()
            } else {
                let mut e =
                    flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(&page()).unwrap();
                e.finish().unwrap()
            };
            Page::new(200, &[("content-encoding", "deflate")], body)
        })
        .await;
        let f = fetcher();
        for path in ["/zlib", "/raw"] {
            let resp = f.get(&server.parsed_url(path)).await.unwrap();
            assert_eq!(resp.body, page(), "{path}");
            assert!(!resp.truncated);
        }
    }

    #[tokio::test]
    async fn brotli_body_is_decoded() {
        let server = serve(|_| {
            let mut w = brotli::CompressorWriter::new(Vec::new(), 4096, 5, 22);
            w.write_all(&page()).unwrap();
            Page::new(200, &[("content-encoding", "br")], w.into_inner())
        })
        .await;
        let resp = fetcher().get(&server.parsed_url("/")).await.unwrap();
        assert_eq!(resp.body, page());
        assert!(!resp.truncated);
    }

    #[tokio::test]
    async fn unknown_or_stacked_encoding_left_as_is() {
        let server = serve(|req| {
            let coding = if req.uri().path() == "/zstd" {
                "zstd"
            } else {
                "gzip, br"
            };
            Page::new(
                200,
                &[("content-encoding", coding)],
                b"\x28\xb5opaque".to_vec(),
            )
        })
        .await;
        let f = fetcher();
        for path in ["/zstd", "/stacked"] {
            let resp = f.get(&server.parsed_url(path)).await.unwrap();
            assert_eq!(&resp.body[..], b"\x28\xb5opaque");
        }
    }

    #[tokio::test]
    async fn corrupt_gzip_is_decode_error() {
        let server = serve(|_| {
            Page::new(
                200,
                &[("content-encoding", "gzip")],
                b"definitely not gzip".to_vec(),
            )
        })
        .await;
        let err = fetcher().get(&server.parsed_url("/")).await.unwrap_err();
        assert!(matches!(err, FetchError::Decode(_)), "{err:?}");
        assert!(!err.is_retryable());
    }

    /// 1 GiB of zeros as a ~1 MB gzip member. One fully flushed deflate
    /// segment holding 1 MiB of zeros is repeated 1024 times: a full flush
    /// resets the compressor, so the segments decode independently.
    fn gzip_bomb() -> Vec<u8> {
        const SEGMENT: usize = 1 << 20;
        const COUNT: usize = 1024;
        let zeros = vec![0u8; SEGMENT];
        let mut c = flate2::Compress::new(flate2::Compression::best(), false);
        let mut segment = Vec::with_capacity(64 * 1024);
        c.compress_vec(&zeros, &mut segment, flate2::FlushCompress::Full)
            .unwrap();
        assert_eq!(c.total_in(), SEGMENT as u64, "segment must hold all input");
        let mut crc = flate2::Crc::new();
        crc.update(&zeros);
        let mut one = flate2::Crc::new();
        one.update(&zeros);
        for _ in 1..COUNT {
            crc.combine(&one);
        }
        let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
        for _ in 0..COUNT {
            out.extend_from_slice(&segment);
        }
        out.extend_from_slice(&[0x03, 0x00]); // empty final block
        out.extend_from_slice(&crc.sum().to_le_bytes());
        out.extend_from_slice(&((SEGMENT * COUNT) as u32).to_le_bytes());
        out
    }

    #[test]
    fn bomb_decoder_stops_at_cap_without_overallocating() {
        let bomb = gzip_bomb();
        assert!(bomb.len() < 2 * 1024 * 1024, "bomb is {} bytes", bomb.len());
        let cap = 8 * 1024 * 1024;
        let mut d = BodyDecoder::new(Coding::Gzip, cap);
        let mut hit = false;
        for chunk in bomb.chunks(16 * 1024) {
            if d.feed(chunk).unwrap() {
                hit = true;
                break;
            }
        }
        assert!(hit, "cap was never reached");
        assert!(d.sink().buf.capacity() <= cap);
        let (body, cut) = d.finish(false).unwrap();
        assert!(cut);
        assert_eq!(body.len(), cap);
        assert!(body.iter().all(|&b| b == 0));
    }

    #[tokio::test]
    async fn compression_bomb_is_cut_at_cap() {
        let bomb = gzip_bomb();
        let server =
            serve(move |_| Page::new(200, &[("content-encoding", "gzip")], bomb.clone())).await;
        let started = std::time::Instant::now();
        let resp = fetcher().get(&server.parsed_url("/")).await.unwrap();
        assert!(resp.truncated);
        assert_eq!(resp.body.len(), FetchConfig::default().max_body_bytes);
        assert!(resp.body.iter().all(|&b| b == 0));
        assert!(started.elapsed() < Duration::from_secs(20));
    }

    #[tokio::test]
    async fn oversize_body_is_cut_at_cap() {
        let server = serve(|_| Page::new(200, &[], vec![b'x'; 3 * 1024 * 1024])).await;
        let f = fetcher_with(FetchConfig {
            max_body_bytes: 1024 * 1024,
            ..test_config()
        });
        let resp = f.get(&server.parsed_url("/")).await.unwrap();
        assert!(resp.truncated);
        assert_eq!(resp.body.len(), 1024 * 1024);
        assert_eq!(resp.content_length, Some(3 * 1024 * 1024));
    }

    #[tokio::test]
    async fn body_exactly_at_cap_is_not_truncated() {
        let server = serve(|_| Page::new(200, &[], vec![b'x'; 4096])).await;
        let f = fetcher_with(FetchConfig {
            max_body_bytes: 4096,
            ..test_config()
        });
        let resp = f.get(&server.parsed_url("/")).await.unwrap();
        assert!(!resp.truncated);
        assert_eq!(resp.body.len(), 4096);
    }

    #[tokio::test]
    async fn endless_chunked_body_finishes() {
        let server = RawServer::endless_chunked().await;
        let f = fetcher_with(FetchConfig {
            max_body_bytes: 1024 * 1024,
            ..test_config()
        });
        let resp = f.get(&url_for(server.addr, "/")).await.unwrap();
        assert!(resp.truncated);
        assert_eq!(resp.body.len(), 1024 * 1024);
    }

    #[tokio::test]
    async fn trickling_body_hits_read_timeout() {
        let server = RawServer::trickle(Duration::from_secs(2), 10).await;
        let f = fetcher_with(FetchConfig {
            read_timeout: Duration::from_millis(300),
            ..test_config()
        });
        let err = f.get(&url_for(server.addr, "/")).await.unwrap_err();
        assert!(matches!(err, FetchError::Timeout("body")), "{err:?}");
    }

    #[tokio::test]
    async fn trickling_body_hits_total_timeout() {
        let server = RawServer::trickle(Duration::from_millis(50), 200).await;
        let f = fetcher_with(FetchConfig {
            read_timeout: Duration::from_secs(2),
            total_timeout: Duration::from_millis(700),
            ..test_config()
        });
        let started = std::time::Instant::now();
        let err = f.get(&url_for(server.addr, "/")).await.unwrap_err();
        assert!(matches!(err, FetchError::Timeout("total")), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn zlib_header_detection() {
        assert!(is_zlib_header(0x78, 0x9c));
        assert!(is_zlib_header(0x78, 0x01));
        assert!(is_zlib_header(0x78, 0xda));
        // Raw deflate of typical text starts with a block header, not a zlib one.
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&page()).unwrap();
        let raw = e.finish().unwrap();
        assert!(!is_zlib_header(raw[0], raw[1]));
    }
}
