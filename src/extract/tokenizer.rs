//! The walk over html5gum's tokens: the tree-builder knowledge the tokenizer
//! needs (raw-text states, foreign content), then text, title, headings and
//! links collected as the events arrive.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::convert::Infallible;

use html5gum::emitters::callback::{CallbackEmitter, CallbackEvent};
use html5gum::{Emitter, Error as TokenizerError, ForwardingEmitter, Span, State, Tokenizer};
use url::Url;

use super::boilerplate::{BlockName, Blocks, Regions, region_of};
use super::outline::Outline;
use super::tags::{Attr, Tag, attr_of, breaks_out_of_foreign, breaks_words, classify, state_after};
use super::{Extracted, ExtractedLink, LinkSource};
use crate::normalize::{NormalizeOptions, resolve};

/// Tokenize HTML (streaming tokenizer, never a DOM, never a regex) and extract; about
/// `text_limit` bytes of the visible text at most (0: `text` stays empty, `usize::MAX`:
/// all of it).
pub fn extract_html(
    html: &str,
    page_url: &Url,
    opts: &NormalizeOptions,
    text_limit: usize,
) -> Extracted {
    let mut extractor = Extractor::new(page_url, opts, text_limit);
    // The visible text is at most the page: sized once, not grown by
    // doubling (each step a copy of all the text so far).
    let visible = extractor.visible_limit.min(html.len());
    extractor.text.buf.reserve(visible);
    // Shared between the callback (which decides) and the emitter wrapper (which tells the
    // tokenizer); Cells because both hold them at the same time.
    let next_state = Cell::new(None);
    let foreign = Cell::new(false);
    {
        let callback = |event: CallbackEvent<'_>, _: Span<()>| -> Option<Infallible> {
            extractor.on_event(event);
            if let Some(state) = extractor.next_state.take() {
                next_state.set(Some(state));
            }
            foreign.set(extractor.in_foreign());
            None
        };
        let emitter = StateSwitchingEmitter {
            inner: CallbackEmitter::new(callback),
            next_state: &next_state,
            foreign: &foreign,
        };
        // The &str reader cannot fail (its error type is Infallible).
        let _ = Tokenizer::new_with_emitter(html, emitter).finish();
    }
    extractor.finish(html.len())
}

/// Resolved links a page may hold, in bytes: twice the page, and a floor
/// for small pages. A short relative href resolves to a URL as long as the
/// page's (up to 2 KB): 8 MB of `<a href=?N>` at a long URL would
/// otherwise hold 1.4 GB of links.
fn link_bytes_budget(html_len: usize) -> usize {
    const FLOOR: usize = 1 << 20;
    html_len.saturating_mul(2).saturating_add(FLOOR)
}

/// Wraps html5gum's callback emitter to (a) switch the tokenizer into RAWTEXT/RCDATA/script
/// states the way a tree builder would, which html5gum leaves to the emitter, (b) allow CDATA
/// sections inside svg/math, and (c) skip parse-error bookkeeping we never look at.
struct StateSwitchingEmitter<'c, E> {
    inner: E,
    next_state: &'c Cell<Option<State>>,
    foreign: &'c Cell<bool>,
}

impl<E: Emitter<Token = Infallible>> ForwardingEmitter for StateSwitchingEmitter<'_, E> {
    type Token = Infallible;

    fn inner(&mut self) -> &mut impl Emitter<Token = Infallible> {
        &mut self.inner
    }

    fn emit_current_tag(&mut self) -> Option<State> {
        // The inner emitter runs our callback synchronously, which fills next_state.
        let _ = self.inner.emit_current_tag();
        self.next_state.take()
    }

    fn should_emit_errors(&mut self) -> bool {
        false
    }

    fn emit_error(&mut self, _: TokenizerError) {}

    fn adjusted_current_node_present_but_not_in_html_namespace(&mut self) -> bool {
        self.foreign.get()
    }
}

/// One captured attribute of the current start tag. The buffer is reused across tags.
#[derive(Default)]
struct Slot {
    present: bool,
    value: String,
}

impl Slot {
    fn reset(&mut self) {
        self.present = false;
        self.value.clear();
    }

    fn get(&self) -> Option<&str> {
        self.present.then_some(self.value.as_str())
    }
}

/// Accumulates text with whitespace runs (and tag-boundary breaks) collapsed to one space,
/// never leading or trailing.
#[derive(Default)]
struct Collector {
    buf: String,
    pending_space: bool,
}

impl Collector {
    fn push(&mut self, s: &str) {
        // Byte-level scan: this is the hottest part of extraction after the tokenizer.
        let bytes = s.as_bytes();
        let mut start = 0;
        let mut i = 0;
        while i < bytes.len() {
            // Eight bytes of plain prose at a time: printable ASCII with
            // single spaces inside the run, which are all kept.
            if let Some(chunk) = bytes.get(i..i + 8)
                && prose(
                    u64::from_le_bytes(chunk.try_into().unwrap_or_default()),
                    i > start,
                )
            {
                i += 8;
                continue;
            }
            let b = bytes[i];
            let sep_len = if b.is_ascii() {
                if !is_ascii_separator(b) {
                    i += 1;
                    continue;
                }
                // A lone space between two words is already collapsed: keep it inside the run
                // so prose is copied in long memcpys rather than word by word.
                if b == b' ' && i > start && bytes.get(i + 1).is_some_and(|&n| n > b' ' && n < 0x7F)
                {
                    i += 1;
                    continue;
                }
                1
            } else {
                match s[i..].chars().next() {
                    Some(c) if is_text_separator(c) => c.len_utf8(),
                    Some(c) => {
                        i += c.len_utf8();
                        continue;
                    }
                    None => break,
                }
            };
            self.push_run(&s[start..i]);
            self.pending_space = true;
            i += sep_len;
            start = i;
        }
        self.push_run(&s[start..]);
    }

    /// Appends text that has no leading/trailing separators and only single inner spaces.
    fn push_run(&mut self, run: &str) {
        if run.is_empty() {
            return;
        }
        if self.pending_space && !self.buf.is_empty() {
            self.buf.push(' ');
        }
        self.pending_space = false;
        self.buf.push_str(run);
    }

    fn word_break(&mut self) {
        self.pending_space = true;
    }

    fn take(&mut self) -> String {
        self.pending_space = false;
        std::mem::take(&mut self.buf)
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Whether eight text bytes (little-endian) are kept as they are by
/// [`Collector::push`]: printable ASCII, and spaces that are single, not
/// the last byte (the next byte decides) and not the first unless the run
/// has begun (`in_run`). Bit tricks, so that prose is scanned a word, not
/// a byte, at a time.
fn prose(w: u64, in_run: bool) -> bool {
    let low7 = w & !HIGH;
    // High bit of each byte: non-ASCII; below 0x20 (a control); DEL.
    let non_ascii = w & HIGH;
    let control = !(low7 + ONES * 0x60) & HIGH;
    let del = zero_bytes(w ^ (ONES * 0x7F));
    if non_ascii | control | del != 0 {
        return false;
    }
    let spaces = zero_bytes(w ^ (ONES * 0x20));
    let last = 0x80 << 56;
    spaces & (spaces << 8) == 0 && spaces & last == 0 && (in_run || spaces & 0x80 == 0)
}

/// The high bit of each zero byte of `w`, exactly (no borrow across bytes).
fn zero_bytes(w: u64) -> u64 {
    !(((w & !HIGH) + !HIGH) | w | !HIGH)
}

/// Unicode whitespace (so NBSP and ideographic space separate words) plus control characters
/// such as stray NULs, which are never visible.
fn is_text_separator(c: char) -> bool {
    c.is_whitespace() || c.is_control()
}

/// `is_text_separator` for ASCII: space and the C0/DEL controls.
fn is_ascii_separator(b: u8) -> bool {
    b <= b' ' || b == 0x7F
}

fn lossy(bytes: &[u8]) -> Cow<'_, str> {
    // Borrowed (free) in the normal case: the input is a &str and html5gum only splits at
    // ASCII boundaries.
    match std::str::from_utf8(bytes) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

fn has_token(list: &str, token: &str) -> bool {
    list.split_ascii_whitespace()
        .any(|t| t.eq_ignore_ascii_case(token))
}

/// A link whose href is kept raw until the end, because `<base href>` applies to the whole
/// document, including links that precede it.
struct RawLink {
    start: usize,
    end: usize,
    source: LinkSource,
    nofollow: bool,
    /// The visible text of an `<a>` (collected only with visible text).
    text: String,
}

/// Bytes of anchor text kept per link: enough for any real label.
const ANCHOR_TEXT_BYTES: usize = 200;

struct Extractor<'a> {
    page_url: &'a Url,
    opts: &'a NormalizeOptions,

    /// Start tag being read (between OpenStartTag and CloseStartTag), else None.
    tag: Option<Tag>,
    /// The current start tag is an HTML tag that ends foreign content.
    tag_breaks_out: bool,
    attr: Option<Attr>,
    href: Slot,
    rel: Slot,
    src: Slot,
    name: Slot,
    content: Slot,
    class: Slot,
    id: Slot,
    role: Slot,
    /// The block element whose start tag is being read.
    block: Option<BlockName>,
    /// Main content and boilerplate (see `boilerplate`).
    regions: Regions,
    blocks: Blocks,
    /// State for the tokenizer after the start tag just closed.
    next_state: Option<State>,

    /// All visible text; the page's own is cut out of it at the end.
    text: Collector,
    /// Whether `text` is wanted: it is the costliest part after tokenizing.
    /// Bytes of the page's own text to give, at most.
    text_limit: usize,
    /// Bytes of visible text to collect, at most (a chunk may overshoot
    /// it): twice `text_limit`, so chrome ahead of the content leaves room.
    visible_limit: usize,
    title: Collector,
    heading: Collector,
    headings: Vec<String>,
    /// The level of the heading whose start tag is being read (1–6).
    heading_level: u8,
    /// Where the page's sections start (collected with the visible text).
    outline: Outline,
    title_result: Option<String>,
    title_done: bool,
    in_title: bool,
    heading_open: bool,
    /// Inside the raw text of script/style/iframe/noembed/noframes: the tokenizer emits
    /// nothing but text until the matching end tag, so a flag suffices.
    raw_hidden: bool,
    // Open-element counters instead of a stack: enough to know whether text is hidden,
    // and bounded memory however deep or broken the nesting.
    noscript: u32,
    template: u32,
    nav: u32,
    footer: u32,
    svg: u32,
    math: u32,
    foreign_object: u32,

    base_seen: bool,
    base: Option<Url>,
    hrefs: String,
    raw_links: Vec<RawLink>,
    /// The `<a>` whose text is being read (index into `raw_links`).
    open_anchor: Option<usize>,
    anchor: Collector,
    meta_nofollow: bool,
    meta_noindex: bool,
}

impl<'a> Extractor<'a> {
    fn new(page_url: &'a Url, opts: &'a NormalizeOptions, text_limit: usize) -> Self {
        Extractor {
            page_url,
            opts,
            tag: None,
            tag_breaks_out: false,
            attr: None,
            href: Slot::default(),
            rel: Slot::default(),
            src: Slot::default(),
            name: Slot::default(),
            content: Slot::default(),
            class: Slot::default(),
            id: Slot::default(),
            role: Slot::default(),
            block: None,
            regions: Regions::default(),
            blocks: Blocks::default(),
            next_state: None,
            text: Collector::default(),
            text_limit,
            visible_limit: text_limit.saturating_mul(2),
            title: Collector::default(),
            heading: Collector::default(),
            headings: Vec::new(),
            heading_level: 0,
            outline: Outline::default(),
            title_result: None,
            title_done: false,
            in_title: false,
            heading_open: false,
            raw_hidden: false,
            noscript: 0,
            template: 0,
            nav: 0,
            footer: 0,
            svg: 0,
            math: 0,
            foreign_object: 0,
            base_seen: false,
            base: None,
            hrefs: String::new(),
            raw_links: Vec::new(),
            open_anchor: None,
            anchor: Collector::default(),
            meta_nofollow: false,
            meta_noindex: false,
        }
    }

    /// Inside svg/math and not inside an HTML integration point.
    fn in_foreign(&self) -> bool {
        (self.svg > 0 && self.foreign_object == 0) || (self.math > 0 && self.svg == 0)
    }

    fn text_visible(&self) -> bool {
        !self.raw_hidden
            && self.noscript == 0
            && self.template == 0
            && self.nav == 0
            && self.footer == 0
            && self.svg == 0
    }

    fn leave_foreign(&mut self) {
        self.svg = 0;
        self.math = 0;
        self.foreign_object = 0;
    }

    fn slot(&mut self, attr: Attr) -> &mut Slot {
        match attr {
            Attr::Href => &mut self.href,
            Attr::Rel => &mut self.rel,
            Attr::Src => &mut self.src,
            Attr::Name => &mut self.name,
            Attr::Content => &mut self.content,
            Attr::Class => &mut self.class,
            Attr::Id => &mut self.id,
            Attr::Role => &mut self.role,
        }
    }

    fn on_event(&mut self, event: CallbackEvent<'_>) {
        match event {
            CallbackEvent::OpenStartTag { name } => {
                let tag = classify(name);
                self.tag = Some(tag);
                self.block = (tag == Tag::Block).then(|| BlockName::of(name));
                if tag == Tag::Heading {
                    self.heading_level = name[1] - b'0';
                }
                self.tag_breaks_out = self.in_foreign() && breaks_out_of_foreign(name);
                self.attr = None;
                self.href.reset();
                self.rel.reset();
                self.src.reset();
                self.name.reset();
                self.content.reset();
                self.class.reset();
                self.id.reset();
                self.role.reset();
            }
            CallbackEvent::AttributeName { name } => {
                // Attributes on end tags arrive with no open start tag: ignored.
                self.attr = self.tag.and_then(|t| attr_of(t, name));
                if let Some(attr) = self.attr {
                    let slot = self.slot(attr);
                    if slot.present {
                        // Duplicate attribute: the first one wins, as in browsers.
                        self.attr = None;
                    } else {
                        slot.present = true;
                    }
                }
            }
            CallbackEvent::AttributeValue { value } => {
                if let Some(attr) = self.attr {
                    self.slot(attr).value.push_str(&lossy(value));
                }
            }
            CallbackEvent::CloseStartTag { self_closing } => self.start_tag(self_closing),
            CallbackEvent::EndTag { name } => self.end_tag(name),
            CallbackEvent::String { value } => self.on_text(value),
            CallbackEvent::Comment { .. }
            | CallbackEvent::Doctype { .. }
            | CallbackEvent::Error(_) => {}
        }
    }

    fn start_tag(&mut self, self_closing: bool) {
        self.attr = None;
        let Some(tag) = self.tag.take() else { return };
        if self.tag_breaks_out {
            self.leave_foreign();
        }
        let foreign = self.in_foreign();
        match tag {
            Tag::A => {
                // An `<a>` inside another closes it, as in browsers.
                self.close_anchor();
                self.push_link(LinkSource::Anchor);
                if self.text_limit > 0 && self.text_visible() && self.href.get().is_some() {
                    self.open_anchor = Some(self.raw_links.len() - 1);
                }
            }
            Tag::Area => self.push_link(LinkSource::Area),
            Tag::Link => {
                let rel = self.rel.get().unwrap_or("");
                let (canonical, alternate) =
                    (has_token(rel, "canonical"), has_token(rel, "alternate"));
                if canonical {
                    self.push_link(LinkSource::Canonical);
                } else if alternate {
                    self.push_link(LinkSource::Alternate);
                }
            }
            Tag::Frame => self.push_frame(LinkSource::Frame),
            Tag::IFrame => self.push_frame(LinkSource::IFrame),
            Tag::Base => self.set_base(),
            Tag::Meta => self.meta_robots(),
            _ => {}
        }
        match tag {
            // In foreign content self-closing tags really are empty; HTML ignores the flag.
            Tag::Svg if !self_closing => self.svg = self.svg.saturating_add(1),
            Tag::Math if !self_closing => self.math = self.math.saturating_add(1),
            Tag::ForeignObject if self.svg > 0 && !self_closing => {
                self.foreign_object = self.foreign_object.saturating_add(1);
            }
            Tag::NoScript => self.noscript = self.noscript.saturating_add(1),
            Tag::Template => self.template = self.template.saturating_add(1),
            Tag::Nav => self.nav = self.nav.saturating_add(1),
            Tag::Footer => self.footer = self.footer.saturating_add(1),
            Tag::Script | Tag::Style | Tag::IFrame | Tag::NoEmbed | Tag::NoFrames if !foreign => {
                self.raw_hidden = true;
            }
            // An svg <title> is not the document title; one inside <template> is inert.
            Tag::Title if !foreign && self.template == 0 => self.in_title = true,
            Tag::Heading => {
                // A heading start tag implicitly closes an open heading.
                self.close_heading();
                self.heading_open = self.text_visible();
                if self.heading_open && !foreign && self.text_limit > 0 {
                    let at = self.text.buf.len();
                    self.outline
                        .open_heading(at, self.heading_level, self.id.get());
                }
            }
            Tag::Block if !foreign && self.text_limit > 0 => {
                if let Some(name) = self.block.take() {
                    if let Some(id) = self.id.get()
                        && self.text_visible()
                    {
                        if name == BlockName::Section {
                            self.outline.section(self.text.buf.len(), id);
                        } else {
                            self.outline.anchor(id);
                        }
                    }
                    self.end_block();
                    let region = region_of(
                        name,
                        self.class.get().unwrap_or(""),
                        self.id.get().unwrap_or(""),
                        self.role.get().unwrap_or(""),
                    );
                    self.regions.open(name, region);
                }
            }
            Tag::A | Tag::Other if !foreign && self.text_limit > 0 && self.text_visible() => {
                // Targets of links into the page: the nearest before a
                // heading is where a link to its section goes.
                if let Some(id) = self.id.get().or(self.name.get().filter(|_| tag == Tag::A)) {
                    self.outline.anchor(id);
                }
            }
            _ => {}
        }
        if breaks_words(tag) {
            self.word_break();
        }
        self.next_state = if foreign { None } else { state_after(tag) };
    }

    fn end_tag(&mut self, name: &[u8]) {
        self.tag = None;
        self.attr = None;
        // In raw text the tokenizer only emits the matching end tag, so any end tag ends it.
        self.raw_hidden = false;
        if self.in_foreign() && matches!(name, b"p" | b"br") {
            self.leave_foreign();
        }
        let tag = classify(name);
        match tag {
            Tag::Svg => {
                self.svg = self.svg.saturating_sub(1);
                if self.svg == 0 {
                    self.foreign_object = 0;
                }
            }
            Tag::Math => self.math = self.math.saturating_sub(1),
            Tag::ForeignObject => self.foreign_object = self.foreign_object.saturating_sub(1),
            Tag::NoScript => self.noscript = self.noscript.saturating_sub(1),
            Tag::Template => self.template = self.template.saturating_sub(1),
            Tag::Nav => self.nav = self.nav.saturating_sub(1),
            Tag::Footer => self.footer = self.footer.saturating_sub(1),
            Tag::Title => self.close_title(),
            Tag::A => self.close_anchor(),
            // Any of </h1>..</h6> closes whichever heading is open, as in browsers.
            Tag::Heading => self.close_heading(),
            Tag::Block if self.text_limit > 0 => {
                self.end_block();
                self.regions.close(BlockName::of(name));
            }
            _ => {}
        }
        if breaks_words(tag) {
            self.word_break();
        }
    }

    /// A block boundary: the text read since the last one is a block.
    fn end_block(&mut self) {
        self.blocks.end(self.text.buf.len(), &self.regions);
    }

    fn on_text(&mut self, bytes: &[u8]) {
        if self.raw_hidden {
            return;
        }
        let visible = self.text_visible();
        if !visible && !self.in_title {
            return;
        }
        let s = lossy(bytes);
        if self.in_title && !self.title_done {
            self.title.push(&s);
        }
        if visible {
            if self.text.buf.len() < self.visible_limit {
                self.text.push(&s);
                self.blocks.text(s.len(), self.open_anchor.is_some());
            }
            if self.heading_open {
                self.heading.push(&s);
            }
            if self.open_anchor.is_some() && self.anchor.buf.len() < ANCHOR_TEXT_BYTES {
                self.anchor.push(&s);
            }
        }
    }

    fn word_break(&mut self) {
        self.text.word_break();
        self.heading.word_break();
        self.anchor.word_break();
    }

    fn close_anchor(&mut self) {
        if let Some(i) = self.open_anchor.take() {
            let mut text = self.anchor.take();
            text.truncate(text.floor_char_boundary(ANCHOR_TEXT_BYTES));
            self.raw_links[i].text = text;
        }
    }

    fn close_title(&mut self) {
        if !self.in_title {
            return;
        }
        self.in_title = false;
        // Like document.title: the first <title> decides, even if empty.
        if !self.title_done {
            self.title_done = true;
            let t = self.title.take();
            self.title_result = (!t.is_empty()).then_some(t);
        }
    }

    fn close_heading(&mut self) {
        if !self.heading_open {
            return;
        }
        self.heading_open = false;
        let h = self.heading.take();
        self.outline.close_heading(&h, self.text.buf.len());
        if !h.is_empty() {
            self.headings.push(h);
        }
    }

    fn push_link(&mut self, source: LinkSource) {
        let Some(href) = self.href.get() else { return };
        let nofollow = has_token(self.rel.get().unwrap_or(""), "nofollow");
        let start = self.hrefs.len();
        self.hrefs.push_str(href);
        self.raw_links.push(RawLink {
            start,
            end: self.hrefs.len(),
            source,
            nofollow,
            text: String::new(),
        });
    }

    fn push_frame(&mut self, source: LinkSource) {
        let Some(src) = self.src.get() else { return };
        // An empty src loads about:blank, not the page itself.
        if src
            .trim_matches(|c: char| c.is_ascii_whitespace())
            .is_empty()
        {
            return;
        }
        let start = self.hrefs.len();
        self.hrefs.push_str(src);
        self.raw_links.push(RawLink {
            start,
            end: self.hrefs.len(),
            source,
            nofollow: false,
            text: String::new(),
        });
    }

    fn set_base(&mut self) {
        // Only the first <base> with an href counts; if it is unusable the page URL stays the
        // base (as with the WHATWG "frozen base URL" fallback).
        if self.base_seen {
            return;
        }
        if let Some(href) = self.href.get() {
            self.base_seen = true;
            self.base = resolve(self.page_url, href, self.opts).ok();
        }
    }

    fn meta_robots(&mut self) {
        let is_robots = self
            .name
            .get()
            .is_some_and(|n| n.trim().eq_ignore_ascii_case("robots"));
        if !is_robots {
            return;
        }
        let content = self.content.get().unwrap_or("");
        for directive in content
            .split(|c: char| c == ',' || c.is_ascii_whitespace())
            .filter(|d| !d.is_empty())
        {
            if directive.eq_ignore_ascii_case("none") {
                self.meta_nofollow = true;
                self.meta_noindex = true;
            } else if directive.eq_ignore_ascii_case("nofollow") {
                self.meta_nofollow = true;
            } else if directive.eq_ignore_ascii_case("noindex") {
                self.meta_noindex = true;
            }
        }
    }

    fn finish(mut self, html_len: usize) -> Extracted {
        // Unclosed title/heading at EOF: browsers keep what was read.
        self.close_title();
        self.close_heading();
        self.close_anchor();
        self.end_block();
        let visible = self.text.take();
        let head = visible.floor_char_boundary(web_crawler_actors::traps::SIMHASH_TEXT_BYTES);
        let visible_head = visible[..head].to_string();
        let (text, kept) = std::mem::take(&mut self.blocks).content(visible, self.text_limit);
        let sections = std::mem::take(&mut self.outline).sections(&kept);
        let base = self.base.as_ref().unwrap_or(self.page_url);
        let mut invalid_links = 0;
        let mut links: Vec<ExtractedLink> = Vec::with_capacity(self.raw_links.len());
        let mut link_bytes = 0;
        let budget = link_bytes_budget(html_len);
        let mut over_budget = 0;
        for raw in &mut self.raw_links {
            if link_bytes > budget {
                over_budget += 1;
                continue;
            }
            match resolve(base, &self.hrefs[raw.start..raw.end], self.opts) {
                Ok(url) => links.push(ExtractedLink {
                    url,
                    source: raw.source,
                    nofollow: raw.nofollow,
                    text: std::mem::take(&mut raw.text),
                }),
                Err(_) => invalid_links += 1,
            }
            link_bytes += links.last().map_or(0, |l| l.url.as_str().len());
        }
        if over_budget > 0 {
            tracing::debug!(page = %self.page_url, over_budget, "links past the page's budget are not kept");
        }
        // Dedupe with a map borrowing the URLs' own strings: no extra allocation per link.
        // A kept link without text (a nav link) takes the first text a repeat has.
        let (keep, texts): (Vec<bool>, Vec<(usize, usize)>) = {
            let mut seen: HashMap<&str, usize> = HashMap::with_capacity(links.len());
            let mut texts = Vec::new();
            let keep = links
                .iter()
                .enumerate()
                .map(|(i, l)| match seen.entry(l.url.as_str()) {
                    Entry::Vacant(v) => {
                        v.insert(i);
                        true
                    }
                    Entry::Occupied(o) => {
                        if !l.text.is_empty() && links[*o.get()].text.is_empty() {
                            texts.push((*o.get(), i));
                        }
                        false
                    }
                })
                .collect();
            (keep, texts)
        };
        for (to, from) in texts {
            if links[to].text.is_empty() {
                links[to].text = std::mem::take(&mut links[from].text);
            }
        }
        let mut keep = keep.into_iter();
        links.retain(|_| keep.next().unwrap_or(false));
        Extracted {
            title: self.title_result,
            headings: self.headings,
            sections,
            text,
            visible_head,
            links,
            invalid_links,
            links_over_budget: over_budget,
            base: self.base,
            meta_nofollow: self.meta_nofollow,
            meta_noindex: self.meta_noindex,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::{decode_body, is_html};

    /// [`Collector::push`]'s rule a byte (or char) at a time, as it was
    /// written before the eight-byte scan.
    fn push_bytewise(c: &mut Collector, s: &str) {
        let bytes = s.as_bytes();
        let (mut start, mut i) = (0, 0);
        while i < bytes.len() {
            let b = bytes[i];
            let sep_len = if b.is_ascii() {
                if !is_ascii_separator(b)
                    || (b == b' '
                        && i > start
                        && bytes.get(i + 1).is_some_and(|&n| n > b' ' && n < 0x7F))
                {
                    i += 1;
                    continue;
                }
                1
            } else {
                let ch = s[i..].chars().next().unwrap();
                if !is_text_separator(ch) {
                    i += ch.len_utf8();
                    continue;
                }
                ch.len_utf8()
            };
            c.push_run(&s[start..i]);
            c.pending_space = true;
            i += sep_len;
            start = i;
        }
        c.push_run(&s[start..]);
    }

    #[test]
    fn the_eight_byte_scan_collects_what_the_bytewise_rule_does() {
        let parts = [
            "word",
            " ",
            "  ",
            "\t",
            "\n",
            "é",
            "\u{a0}",
            "\u{7f}",
            "\0",
            "x",
            "ab cd",
            ". ",
            "\u{3000}",
            "longerword",
            "1234567",
            " a b c d e f ",
        ];
        // Deterministic mixes of the parts, of every length up to 40.
        let mut state = 7u64;
        for _ in 0..5_000 {
            let mut text = String::new();
            while text.len() < (state % 41) as usize {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                text.push_str(parts[(state >> 33) as usize % parts.len()]);
            }
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
            let (mut fast, mut slow) = (Collector::default(), Collector::default());
            for piece in [&text[..], " tail", &text[..]] {
                fast.push(piece);
                push_bytewise(&mut slow, piece);
            }
            assert_eq!(fast.take(), slow.take(), "{text:?}");
        }
    }

    #[test]
    fn prose_is_printable_ascii_with_single_inner_spaces() {
        let w = |s: &[u8; 8]| u64::from_le_bytes(*s);
        assert!(prose(w(b"abc defg"), false));
        assert!(prose(w(b" bc defg"), true));
        assert!(!prose(w(b" bc defg"), false));
        assert!(!prose(w(b"abc  efg"), true));
        assert!(!prose(w(b"abcdefg "), true));
        assert!(!prose(w(b"abc\tdefg"), true));
        assert!(!prose(w(b"abc\x7fdefg"[..8].try_into().unwrap()), true));
        assert!(!prose(
            w(&[b'a', 0xC3, 0xA9, b'b', b'c', b'd', b'e', b'f']),
            true
        ));
        assert!(prose(w(b"~!@#$%^&"), false));
    }

    fn page() -> Url {
        Url::parse("https://example.com/dir/page.html").unwrap()
    }

    fn ex(html: &str) -> Extracted {
        extract_html(html, &page(), &NormalizeOptions::default(), usize::MAX)
    }

    fn urls(e: &Extracted) -> Vec<&str> {
        e.links.iter().map(|l| l.url.as_str()).collect()
    }

    /// "Привет" in windows-1251.
    const PRIVET_1251: &[u8] = b"\xCF\xF0\xE8\xE2\xE5\xF2";

    /// `(offset, level, heading, anchor)` of each section, and the text
    /// each starts with.
    fn sections(e: &Extracted) -> Vec<(u8, &str, &str, &str)> {
        e.sections
            .iter()
            .map(|s| {
                let at = &e.text[s.offset as usize..];
                (
                    s.level,
                    s.heading.as_str(),
                    s.anchor.as_str(),
                    &at[..at.floor_char_boundary(12)],
                )
            })
            .collect()
    }

    #[test]
    fn docbook_sections_start_at_their_headings_with_their_divs_ids() {
        // The PostgreSQL manual's shape: the id on the section's div, the
        // navigation in a table of its own, an index term's anchor inside.
        let para = "Text of the section that says enough to be the page's own. ".repeat(4);
        let html = format!(
            "<html><head><title>9.18. Conditional Expressions</title></head><body>\
             <div class=\"navheader\"><table><tr><th>9.18. Conditional Expressions</th></tr>\
             <tr><td><a href=\"a.html\">Prev</a></td></tr></table></div>\
             <div class=\"sect1\" id=\"FUNCTIONS-CONDITIONAL\"><div class=\"titlepage\"><div><div>\
             <h2 class=\"title\">9.18. Conditional Expressions</h2></div></div></div><p>Lead {para}</p>\
             <div class=\"sect2\" id=\"FUNCTIONS-CASE\"><div class=\"titlepage\"><div><div>\
             <h3 class=\"title\">9.18.1. CASE</h3></div></div></div><p>Case {para}</p>\
             <a id=\"id-1.5.8.24.8.2\" class=\"indexterm\"></a><p>More {para}</p></div>\
             <div class=\"sect2\" id=\"FUNCTIONS-COALESCE-NVL-IFNULL\"><div class=\"titlepage\"><div><div>\
             <h3 class=\"title\">9.18.2. COALESCE</h3></div></div></div><p>Coalesce {para}</p></div>\
             <h5>A small heading</h5><p>Small {para}</p></div>\
             <div class=\"navfooter\"><h3>Footer heading</h3></div></body></html>"
        );
        let e = ex(&html);
        assert_eq!(
            sections(&e),
            [
                (
                    2,
                    "9.18. Conditional Expressions",
                    "FUNCTIONS-CONDITIONAL",
                    "9.18. Condit"
                ),
                (3, "9.18.1. CASE", "FUNCTIONS-CASE", "9.18.1. CASE"),
                (
                    3,
                    "9.18.2. COALESCE",
                    "FUNCTIONS-COALESCE-NVL-IFNULL",
                    "9.18.2. COAL"
                ),
            ]
        );
    }

    #[test]
    fn sphinx_and_markdown_sections_take_the_section_or_heading_id() {
        let para = "Words of this part of the page, plenty of them to keep. ".repeat(4);
        let html = format!(
            "<html><head><title>csv</title></head><body>\
             <div class=\"sphinxsidebar\" role=\"navigation\"><h3>Table of Contents</h3></div>\
             <div role=\"main\"><section id=\"module-csv\"><h1>csv — CSV File Reading\
             <a class=\"headerlink\" href=\"#module-csv\">¶</a></h1><p>{para}</p>\
             <section id=\"dialects\"><h2>Dialects<a class=\"headerlink\" href=\"#dialects\">¶</a></h2>\
             <p>{para}</p></section></section>\
             <h2 id=\"usage\">Usage</h2><p>{para}</p>\
             <h3><a name=\"old-style\"></a>Old style</h3><p>{para}</p>\
             <h3>No anchor of its own</h3><p>{para}</p></div></body></html>"
        );
        let e = ex(&html);
        let got: Vec<(u8, &str, &str)> = sections(&e).iter().map(|s| (s.0, s.1, s.2)).collect();
        assert_eq!(
            got,
            [
                (1, "csv — CSV File Reading", "module-csv"),
                (2, "Dialects", "dialects"),
                (2, "Usage", "usage"),
                (3, "Old style", "old-style"),
                (3, "No anchor of its own", "old-style"),
            ]
        );
        assert!(e.text.starts_with("csv"), "{:?}", &e.text[..40]);
        // No text wanted: no outline either.
        let none = extract_html(&html, &page(), &NormalizeOptions::default(), 0);
        assert!(none.sections.is_empty());
    }

    #[test]
    fn title_headings_text_separation() {
        let e = ex("<!doctype html><html><head><title>  My \n Page </title>\
             <style>body { color: red }</style><script>var x = '<p>no</p>';</script>\
             <meta charset=utf-8></head><body>\
             <nav><a href=/home>Home</a> Menu</nav>\
             <h1>Main   Title</h1><p>First para.</p>\
             <h2>Sub <b>heading</b></h2><p>Second</p>\
             <footer>Copyright <a href=/legal>legal</a></footer>\
             <noscript>Enable JS</noscript><template><p>tpl</p></template>\
             <svg><title>icon</title><text>svgtext</text></svg>\
             <p>End</p></body></html>");
        assert_eq!(e.title.as_deref(), Some("My Page"));
        assert_eq!(e.headings, vec!["Main Title", "Sub heading"]);
        assert_eq!(
            e.text,
            "My Page Main Title First para. Sub heading Second End"
        );
        // Links in nav and footer are still extracted; only their text is hidden.
        assert_eq!(
            urls(&e),
            vec!["https://example.com/home", "https://example.com/legal"]
        );
    }

    /// A page as Sphinx writes it (the Python docs): the related-links bar
    /// above and below, a sidebar with the previous and next topics, the
    /// body marked `role=main`, a footer of `div.footer`.
    const SPHINX: &str = "<!doctype html><html><head><title>csv — CSV File Reading</title></head>\
        <body><div class=\"related\" role=\"navigation\" aria-label=\"related navigation\">\
        <h3>Navigation</h3><ul><li class=\"right\"><a href=\"/genindex.html\">index</a></li>\
        <li class=\"right\"><a href=\"/py-modindex.html\">modules</a> |</li>\
        <li><a href=\"/configparser.html\">next</a> |</li></ul></div>\
        <div class=\"document\"><div class=\"documentwrapper\"><div class=\"bodywrapper\">\
        <div class=\"body\" role=\"main\"><section id=\"module-csv\">\
        <h1>csv — CSV File Reading and Writing</h1>\
        <p>The so-called CSV (Comma Separated Values) format is the most common import and \
        export format for spreadsheets and databases. CSV format was used for many years \
        prior to attempts to describe the format in a standardized way in \
        <a href=\"https://tools.ietf.org/html/rfc4180.html\">RFC 4180</a>.</p>\
        <p>The csv module implements classes to read and write tabular data in CSV format.</p>\
        </section></div></div></div>\
        <div class=\"sphinxsidebar\" role=\"navigation\" aria-label=\"main navigation\">\
        <div class=\"sphinxsidebarwrapper\"><h4>Previous topic</h4><p class=\"topless\">\
        <a href=\"/tarfile.html\">tarfile — Read and write tar archive files</a></p>\
        <h4>Next topic</h4><p><a href=\"/configparser.html\">configparser</a></p>\
        <div role=\"note\"><h3>This Page</h3><ul class=\"this-page-menu\">\
        <li><a href=\"/bugs.html\">Report a Bug</a></li>\
        <li><a href=\"/_sources/csv.rst.txt\">Show Source</a></li></ul></div></div></div>\
        <div class=\"clearer\"></div></div>\
        <div class=\"footer\">&copy; Copyright 2001-2023, Python Software Foundation.<br>\
        This page is licensed under the Python Software Foundation License Version 2.</div>\
        </body></html>";

    #[test]
    fn sphinx_chrome_is_not_the_pages_text() {
        let e = ex(SPHINX);
        assert!(
            e.text
                .starts_with("csv — CSV File Reading and Writing The so-called CSV")
        );
        assert!(
            e.text.ends_with("tabular data in CSV format."),
            "{}",
            e.text
        );
        for chrome in [
            "Navigation",
            "Previous topic",
            "Next topic",
            "Show Source",
            "Copyright",
        ] {
            assert!(!e.text.contains(chrome), "{chrome:?} in {:?}", e.text);
        }
        // The chrome's links are still followed, with their text.
        let bugs = e
            .links
            .iter()
            .find(|l| l.url.path() == "/bugs.html")
            .unwrap();
        assert_eq!(bugs.text, "Report a Bug");
        // The heading stays a heading; the link inside the paragraph stays text.
        assert!(e.text.contains("in RFC 4180."));
        assert_eq!(e.headings[0], "Navigation");
    }

    #[test]
    fn docbook_navigation_tables_and_link_lists_are_left_out() {
        // The PostgreSQL manual's page shape: navheader and navfooter
        // tables, a table of contents (all links), then the text.
        let e = ex(
            "<html><head><title>9.27. System Administration Functions</title></head><body>\
            <div class=\"navheader\"><table><tr><th colspan=3>9.27. System Administration \
            Functions</th></tr><tr><td><a href=\"a.html\">Prev</a></td><td><a href=\"b.html\">\
            Up</a></td><th>Chapter 9. Functions and Operators</th><td><a href=\"c.html\">\
            Next</a></td></tr></table><hr></div>\
            <div class=\"sect1\"><div class=\"toc\"><dl><dt><a href=\"d.html\">9.27.1. \
            Configuration Settings Functions</a></dt><dt><a href=\"e.html\">9.27.2. Server \
            Signaling Functions</a></dt></dl></div>\
            <p>The functions described in this section are used to control and monitor a \
            PostgreSQL installation. pg_cancel_backend cancels the current query of the \
            session whose backend process has the specified process ID.</p></div>\
            <div class=\"navfooter\"><hr><table><tr><td><a href=\"a.html\">Prev</a></td>\
            <td><a href=\"/index.html\">Home</a></td></tr></table></div></body></html>",
        );
        // The title leads (the page marks no main region), then the text.
        assert!(
            e.text
                .starts_with("9.27. System Administration Functions The functions described"),
            "{}",
            e.text
        );
        assert!(e.text.ends_with("specified process ID."), "{}", e.text);
        assert!(!e.text.contains("Prev") && !e.text.contains("Configuration Settings"));
    }

    #[test]
    fn a_page_without_content_blocks_keeps_its_text() {
        // A hub page: nothing but links. Its text is all it has.
        let links: String = (0..40)
            .map(|i| format!("<li><a href=\"/p{i}\">Chapter {i}</a></li>"))
            .collect();
        let e = ex(&format!("<ul>{links}</ul>"));
        assert!(e.text.starts_with("Chapter 0 Chapter 1"), "{}", e.text);
        // A short page of its own text, inside a sidebar-named wrapper
        // (mis-named sites exist): all of it stays.
        let e = ex("<div class=\"with-sidebar\"><p>Short note.</p></div>");
        assert_eq!(e.text, "Short note.");
    }

    #[test]
    fn whitespace_collapse_and_word_breaks() {
        let e = ex(
            "<p>  a \t\n b  </p><p>c</p>d<br>e<span>f</span>g<li>h\u{a0}\u{3000}i</li>\
                    <div>\r\n</div>  <b>j</b><i>k</i>",
        );
        assert_eq!(e.text, "a b c d efg h i jk");
        assert!(!e.text.starts_with(' ') && !e.text.ends_with(' '));
        let e = ex("   ");
        assert_eq!(e.text, "");
        // Inline elements and comments do not split words.
        assert_eq!(ex("un<em>break</em>able<!-- c -->s").text, "unbreakables");
    }

    #[test]
    fn entities_decoded() {
        let e = ex(
            "<title>Tom &amp; Jerry</title><p>a &amp; b &lt;c&gt; &eacute; &#x41;&#66; \
                    &nbsp;x &zzz;</p><a href=\"/q?a=1&amp;b=2\">l</a>",
        );
        assert_eq!(e.title.as_deref(), Some("Tom & Jerry"));
        // The link after the paragraph is a block of link text: not the page's own.
        assert_eq!(e.text, "Tom & Jerry a & b <c> é AB x &zzz;");
        assert_eq!(urls(&e), vec!["https://example.com/q?a=1&b=2"]);
        // Legacy unterminated entity in an attribute value followed by '=' stays literal.
        let e = ex("<a href='/q?x=1&copy=2'>l</a>");
        assert_eq!(urls(&e), vec!["https://example.com/q?x=1&copy=2"]);
    }

    #[test]
    fn links_kinds_and_order() {
        let e = ex("<link rel=stylesheet href=/s.css>\
                    <link rel=\"Canonical\" href=\"https://example.com/canon\">\
                    <link rel=\"alternate\" hreflang=de href=/de/>\
                    <link rel=\"ALTERNATE stylesheet\" href=/alt.css>\
                    <a href=a.html>a</a><area href=/map><frame src=f.html>\
                    <iframe src=\"//cdn.example.org/i\"></iframe>\
                    <a name=anchor-without-href>x</a><a href=\"../up\">up</a>");
        let got: Vec<(&str, LinkSource)> =
            e.links.iter().map(|l| (l.url.as_str(), l.source)).collect();
        assert_eq!(
            got,
            vec![
                ("https://example.com/canon", LinkSource::Canonical),
                ("https://example.com/de/", LinkSource::Alternate),
                ("https://example.com/alt.css", LinkSource::Alternate),
                ("https://example.com/dir/a.html", LinkSource::Anchor),
                ("https://example.com/map", LinkSource::Area),
                ("https://example.com/dir/f.html", LinkSource::Frame),
                ("https://cdn.example.org/i", LinkSource::IFrame),
                ("https://example.com/up", LinkSource::Anchor),
            ]
        );
        assert_eq!(e.invalid_links, 0);
    }

    #[test]
    fn anchor_text_is_the_visible_text_of_content_links() {
        let html = "<nav><a href=/docs>Docs</a></nav>\
                    <p>See <a href=/docs>the <b>installation</b>\n guide</a> and \
                    <a href=/x>first<a href=/y>second</a> <a href=/img><img alt=i></a>\
                    <script>var a = '<a href=/s>no</a>';</script>";
        let e = extract_html(html, &page(), &NormalizeOptions::default(), usize::MAX);
        let got: Vec<(&str, &str)> = e
            .links
            .iter()
            .map(|l| (l.url.path(), l.text.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                // The nav link comes first and takes the content link's text.
                ("/docs", "the installation guide"),
                ("/x", "first"),
                ("/y", "second"),
                ("/img", ""),
            ]
        );
        // Without visible text, no anchor text either (the cheap path).
        let e = extract_html(html, &page(), &NormalizeOptions::default(), 0);
        assert!(e.links.iter().all(|l| l.text.is_empty()));
        // A label is bounded.
        let long = format!("<a href=/l>{}</a>", "word ".repeat(200));
        let e = extract_html(&long, &page(), &NormalizeOptions::default(), usize::MAX);
        assert!(e.links[0].text.len() <= 200 && e.links[0].text.starts_with("word word"));
    }

    #[test]
    fn nofollow_on_anchors() {
        let e = ex(
            "<a href=/a rel=nofollow>a</a><a href=/b rel=\"noopener NoFollow\">b</a>\
                    <a href=/c rel=\"nofollowx\">c</a><a href=/d>d</a>\
                    <area href=/e rel=nofollow><link rel='canonical nofollow' href=/f>",
        );
        let got: Vec<(&str, bool)> = e.links.iter().map(|l| (l.url.path(), l.nofollow)).collect();
        assert_eq!(
            got,
            vec![
                ("/a", true),
                ("/b", true),
                ("/c", false),
                ("/d", false),
                ("/e", true),
                ("/f", true)
            ]
        );
        assert!(!e.meta_nofollow);
    }

    #[test]
    fn dedupe_keeps_first_and_counts_invalid() {
        let e = ex("<a href=/x#one rel=nofollow>1</a><a href='/x#two'>2</a>\
                    <a href='HTTPS://EXAMPLE.COM:443/x'>3</a>\
                    <a href='javascript:void(0)'>js</a><a href='mailto:a@b.c'>m</a>\
                    <a href='tel:123'>t</a><a href='http://'>nohost</a>\
                    <a href='http://exa mple.com/'>bad</a><a href='  /y  '>y</a>\
                    <a href=''>self</a><a href='#top'>top</a>");
        assert_eq!(
            urls(&e),
            vec![
                "https://example.com/x",
                "https://example.com/y",
                "https://example.com/dir/page.html"
            ]
        );
        assert!(e.links[0].nofollow, "first occurrence kept");
        assert_eq!(e.invalid_links, 5);
    }

    #[test]
    fn duplicate_attribute_first_wins() {
        let e = ex("<a href=/first href=/second rel=x rel=nofollow>x</a>");
        assert_eq!(urls(&e), vec!["https://example.com/first"]);
        assert!(!e.links[0].nofollow);
    }

    #[test]
    fn meta_robots() {
        let e = ex("<meta name=robots content='noindex, nofollow'>");
        assert!(e.meta_noindex && e.meta_nofollow);
        let e = ex("<meta name=\"ROBOTS\" content=\"NOFOLLOW\">");
        assert!(e.meta_nofollow && !e.meta_noindex);
        let e = ex("<meta name=robots content=noindex>");
        assert!(e.meta_noindex && !e.meta_nofollow);
        let e = ex("<meta name=robots content='None'>");
        assert!(e.meta_noindex && e.meta_nofollow);
        let e = ex("<meta content='noindex,nofollow' name='robots'>");
        assert!(e.meta_noindex && e.meta_nofollow);
        let e = ex("<meta name=robots content='index, follow, noarchive'>\
                    <meta name=description content='nofollow noindex none'>\
                    <meta name=googlebot content=none><meta content=none>");
        assert!(!e.meta_noindex && !e.meta_nofollow);
        let e = ex("<meta name=robots content=noindex><meta name=robots content=nofollow>");
        assert!(e.meta_noindex && e.meta_nofollow);
    }

    #[test]
    fn base_href() {
        let e = ex("<head><base href='https://cdn.example.net/root/'></head>\
                    <a href=rel>r</a><a href=/abs>a</a><a href=//o.example/>o</a>");
        assert_eq!(
            e.base.as_ref().unwrap().as_str(),
            "https://cdn.example.net/root/"
        );
        assert_eq!(
            urls(&e),
            vec![
                "https://cdn.example.net/root/rel",
                "https://cdn.example.net/abs",
                "https://o.example/"
            ]
        );
        // Relative base resolves against the page; it applies to links before it too; only
        // the first base with an href counts.
        let e = ex("<a href=x>x</a><base target=_blank><base href='/other/'>\
                    <base href='https://ignored.example/'>");
        assert_eq!(
            e.base.as_ref().unwrap().as_str(),
            "https://example.com/other/"
        );
        assert_eq!(urls(&e), vec!["https://example.com/other/x"]);
        // Unusable first base → page URL is the base.
        let e = ex("<base href='javascript:alert(1)'><base href='/later/'><a href=x>x</a>");
        assert_eq!(e.base, None);
        assert_eq!(urls(&e), vec!["https://example.com/dir/x"]);
        assert_eq!(ex("<a href=x>x</a>").base, None);
    }

    #[test]
    fn canonical() {
        let e = ex("<link rel=canonical href='https://Example.com:443/Canon?utm_source=x#f'>");
        assert_eq!(e.links.len(), 1);
        assert_eq!(e.links[0].source, LinkSource::Canonical);
        // Tracking parameters are dropped by default...
        assert_eq!(e.links[0].url.as_str(), "https://example.com/Canon");
        let opts = NormalizeOptions {
            strip_tracking_params: false,
            sort_query: false,
        };
        let e = extract_html(
            "<link rel=canonical href='/Canon?utm_source=x'>",
            &page(),
            &opts,
            usize::MAX,
        );
        // ...and kept when asked.
        assert_eq!(
            e.links[0].url.as_str(),
            "https://example.com/Canon?utm_source=x"
        );
        // link without canonical/alternate, or without href, is ignored
        let e = ex("<link rel=icon href=/favicon.ico><link rel=canonical>");
        assert!(e.links.is_empty());
        assert_eq!(e.invalid_links, 0);
    }

    #[test]
    fn frames() {
        let e = ex(
            "<frameset><frame src=top.html><frame src=' /main '></frameset>\
                    <iframe src=''></iframe><iframe>fallback <a href=/no>no</a></iframe>\
                    <iframe src=/embed>raw <b>text</b></iframe><p>after</p>",
        );
        let got: Vec<(&str, LinkSource)> =
            e.links.iter().map(|l| (l.url.path(), l.source)).collect();
        assert_eq!(
            got,
            vec![
                ("/dir/top.html", LinkSource::Frame),
                ("/main", LinkSource::Frame),
                ("/embed", LinkSource::IFrame)
            ]
        );
        // iframe content is raw text (not markup) and not shown.
        assert_eq!(e.text, "after");
    }

    #[test]
    fn script_with_end_tag_lookalikes() {
        let e = ex(
            "<script>document.write('</scr' + 'ipt>'); var s = '<a href=/fake>x</a>';\
                    if (a < b && c > d) {}</script><p>shown</p>\
                    <script><!-- document.write('<script></script>'); --></script><p>too</p>",
        );
        assert_eq!(e.text, "shown too");
        assert!(e.links.is_empty());
        // Upper-case end tag and attributes on it still close the script.
        let e = ex("<SCRIPT type=text/javascript>x()</SCRIPT foo=bar><p>ok</p>");
        assert_eq!(e.text, "ok");
    }

    #[test]
    fn style_and_textarea_are_raw() {
        let e = ex("<style>p::before { content: '<a href=/x>' }</style>\
                    <textarea><a href=/y>&amp;</textarea><xmp><b>x</b></xmp>");
        assert!(e.links.is_empty());
        assert_eq!(e.text, "<a href=/y>& <b>x</b>");
    }

    #[test]
    fn noscript_text_hidden_but_links_seen() {
        let e = ex("<p>a</p><noscript><a href=/nojs>Please enable JS</a></noscript><p>b</p>");
        assert_eq!(e.text, "a b");
        assert_eq!(urls(&e), vec!["https://example.com/nojs"]);
    }

    #[test]
    fn svg_foreign_content() {
        // <title>/<style> inside svg are not raw text and not the document title.
        let e = ex(
            "<svg><title>Icon</title><style>.a{}</style><a href=/in-svg>x</a></svg>\
                    <title>Real</title><p>after</p>",
        );
        assert_eq!(e.title.as_deref(), Some("Real"));
        assert_eq!(e.text, "Real after");
        assert_eq!(urls(&e), vec!["https://example.com/in-svg"]);
        // Self-closing svg does not open anything.
        assert_eq!(ex("<svg/><p>visible</p>").text, "visible");
        // An unclosed svg is ended by an HTML block tag, as in browsers.
        assert_eq!(ex("<svg><path d=''><p>visible</p>").text, "visible");
        // foreignObject content is still inside the svg: hidden.
        assert_eq!(
            ex("<svg><foreignObject><div>fo</div></foreignObject></svg><p>x</p>").text,
            "x"
        );
        // CDATA is allowed in svg and does not leak.
        assert_eq!(ex("<svg><![CDATA[<p>cdata</p>]]></svg>ok").text, "ok");
        // MathML text is visible.
        assert_eq!(ex("<math><mi>x</mi></math>").text, "x");
    }

    #[test]
    fn title_edge_cases() {
        assert_eq!(ex("<p>no title</p>").title, None);
        assert_eq!(ex("<title>  </title>").title, None);
        // First title decides, later ones are not the title (but their text is visible).
        let e = ex("<title>One</title><title>Two</title>");
        assert_eq!(e.title.as_deref(), Some("One"));
        assert_eq!(e.text, "One Two");
        // Title is RCDATA: tags inside are text.
        assert_eq!(
            ex("<title>a <b>b</b></title>").title.as_deref(),
            Some("a <b>b</b>")
        );
        // Unclosed title swallows the rest, like browsers.
        assert_eq!(ex("<title>t <p>x").title.as_deref(), Some("t <p>x"));
        // Title inside template is inert.
        assert_eq!(ex("<template><title>T</title></template>").title, None);
    }

    #[test]
    fn heading_edge_cases() {
        let e = ex("<h1>a<h2>b</h2>c</h1><h3></h3><h4> d\n e </h4><h5>unclosed");
        assert_eq!(e.headings, vec!["a", "b", "d e", "unclosed"]);
        assert_eq!(e.text, "a b c d e unclosed");
        let e = ex("<nav><h2>Menu</h2></nav><footer><h3>Contact</h3></footer><h1>Real</h1>");
        assert_eq!(e.headings, vec!["Real"]);
        let e = ex("<h1>Top <script>x</script><span>n</span>ews<nav>skip</nav></h1>");
        assert_eq!(e.headings, vec!["Top news"]);
    }

    #[test]
    fn broken_html_does_not_panic() {
        let cases = [
            "<a href=/x",
            "<a href='/x",
            "<a href=/ok>ok",
            "<<<>>><a <b <c>>",
            "< p>text</ p>",
            "a < b > c",
            "<a href=/u1 title=x y=z/ >1</a><a href=unquoted/path?x=1&y=2>2</a>",
            "<div><span><p>unclosed",
            "</nav></footer></svg></script>stray ends",
            "<!-- unclosed comment <a href=/hidden>",
            "<!doctype",
            "<![CDATA[ x ]]>",
            "<?php echo 1 ?>text",
            "&#0; &#x110000; &#xD800; &#99999999999999; &",
            "<a href=\"\0/nul\">n</a>\0\0text\0",
            "<script>never closed <a href=/no>",
            "<style>",
            "<title>",
            "<plaintext><a href=/no>",
            "<nav><nav></nav>still hidden</nav>visible",
            "<a href=\"/\u{1F600}\">emoji</a>",
            "\u{FEFF}<p>bom</p>",
        ];
        for html in cases {
            let _ = ex(html);
        }
        let e = ex("<a href=unquoted/path?x=1&y=2>2</a>");
        assert_eq!(
            urls(&e),
            vec!["https://example.com/dir/unquoted/path?x=1&y=2"]
        );
        assert!(
            ex("<a href=/x").links.is_empty(),
            "EOF inside a tag drops it"
        );
        assert_eq!(urls(&ex("<a href=/ok>ok")), vec!["https://example.com/ok"]);
        assert_eq!(
            ex("<nav><nav></nav>still hidden</nav>visible").text,
            "visible"
        );
        assert_eq!(ex("</nav></footer></svg>stray ends").text, "stray ends");
        assert_eq!(ex("a < b > c").text, "a < b > c");
        assert!(ex("<script>never closed <a href=/no>").links.is_empty());
        assert_eq!(ex("<plaintext><a href=/no>").text, "<a href=/no>");
        let e = ex("<a href=\"\0/nul\">n</a>\0\0text\0");
        assert_eq!(e.text, "n text");
        assert_eq!(e.links.len() + e.invalid_links, 1);
    }

    #[test]
    fn deeply_nested() {
        let depth = 100_000;
        let html = format!(
            "{}deep{}",
            "<div><span>".repeat(depth),
            "</span></div>".repeat(depth)
        );
        assert_eq!(ex(&html).text, "deep");
        let html = format!("{}x", "<nav>".repeat(depth));
        assert_eq!(ex(&html).text, "");
        let html = format!("{}<p>y", "<svg><g>".repeat(depth));
        assert_eq!(ex(&html).text, "y");
        let html = "<a href=/a>".repeat(depth);
        assert_eq!(ex(&html).links.len(), 1);
        let html = format!("{}z", "<h1>".repeat(depth));
        assert_eq!(ex(&html).headings, vec!["z"]);
    }

    #[test]
    fn five_megabytes_of_garbage() {
        let mut rng = fastrand::Rng::with_seed(42);
        let alphabet = b"<>/=\"' abcdefghijklmnopqrstuvwxyz!-&#;\n\0\xff";
        let bytes: Vec<u8> = (0..5 * 1024 * 1024)
            .map(|_| alphabet[rng.usize(..alphabet.len())])
            .collect();
        let html = String::from_utf8_lossy(&bytes);
        let e = ex(&html);
        assert!(e.text.len() < html.len());
        let (decoded, _) = decode_body(&bytes, None);
        assert!(!decoded.is_empty());
    }

    #[test]
    fn pseudo_random_inputs_never_panic() {
        const PIECES: &[&str] = &[
            "<",
            ">",
            "</",
            "/>",
            "<a href=",
            "<area href=",
            "<link rel=canonical href=",
            "<base href=",
            "<meta name=robots content=",
            "<frame src=",
            "<iframe src=",
            "\"",
            "'",
            "=",
            " ",
            "\n",
            "&amp;",
            "&",
            "&#",
            "&#x",
            ";",
            "<script>",
            "</script>",
            "<style>",
            "</style>",
            "<title>",
            "</title>",
            "<h1>",
            "</h2>",
            "<nav>",
            "</nav>",
            "<svg>",
            "</svg>",
            "<math>",
            "<foreignObject>",
            "<template>",
            "<noscript>",
            "</noscript>",
            "<!--",
            "-->",
            "<!",
            "<![CDATA[",
            "]]>",
            "<?",
            "<plaintext>",
            "<textarea>",
            "javascript:",
            "http://",
            "//",
            "../",
            "#",
            "?",
            "%",
            "%2e",
            "\0",
            "é",
            "\u{FFFD}",
            "\u{a0}",
            "x",
            "p",
            "<p>",
            "<br/>",
            "<!doctype html>",
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        let page = page();
        let opts = NormalizeOptions {
            strip_tracking_params: true,
            sort_query: true,
        };
        for _ in 0..3000 {
            let mut s = String::new();
            let n = rng.usize(..60);
            for _ in 0..n {
                if rng.usize(..4) == 0 {
                    // Raw random bytes, made valid UTF-8.
                    let raw: Vec<u8> = (0..rng.usize(..8)).map(|_| rng.u8(..)).collect();
                    s.push_str(&String::from_utf8_lossy(&raw));
                } else {
                    s.push_str(PIECES[rng.usize(..PIECES.len())]);
                }
            }
            let e = extract_html(&s, &page, &opts, usize::MAX);
            assert!(!e.text.starts_with(' ') && !e.text.ends_with(' '));
            assert!(!e.text.contains("  "));
            let _ = is_html(None, s.as_bytes());
            let cts = [
                None,
                Some("text/html; charset=shift_jis"),
                Some("text/html; charset=bogus"),
            ];
            let _ = decode_body(s.as_bytes(), cts[rng.usize(..cts.len())]);
        }
    }

    #[test]
    fn mislabelled_charset_yields_replacement() {
        // Header claims UTF-8 but the bytes are latin1.
        let (s, enc) = decode_body(b"<p>caf\xe9 na\xefve</p>", Some("text/html; charset=utf-8"));
        assert_eq!(enc, "UTF-8");
        assert_eq!(s, "<p>caf\u{FFFD} na\u{FFFD}ve</p>");
        let e = extract_html(&s, &page(), &NormalizeOptions::default(), usize::MAX);
        assert_eq!(e.text, "caf\u{FFFD} na\u{FFFD}ve");
    }

    #[test]
    fn decoded_body_extracts() {
        let body = [
            &b"<meta charset=windows-1251><title>"[..],
            PRIVET_1251,
            b"</title><a href='/\xCF'>x</a>",
        ]
        .concat();
        let (s, _) = decode_body(&body, None);
        let e = extract_html(&s, &page(), &NormalizeOptions::default(), usize::MAX);
        assert_eq!(e.title.as_deref(), Some("Привет"));
        // Non-ASCII in hrefs ends up percent-encoded UTF-8.
        assert_eq!(urls(&e), vec!["https://example.com/%D0%9F"]);
    }

    #[test]
    fn visible_text_stops_near_its_limit() {
        let html: String = (0..500)
            .map(|i| format!("<p>paragraph number {i} of the page</p>"))
            .collect();
        let all = extract_html(&html, &page(), &NormalizeOptions::default(), usize::MAX);
        let some = extract_html(&html, &page(), &NormalizeOptions::default(), 1000);
        let none = extract_html(&html, &page(), &NormalizeOptions::default(), 0);
        assert!(all.text.len() > 10_000);
        assert!(
            (1000..1100).contains(&some.text.len()),
            "{}",
            some.text.len()
        );
        assert!(all.text.starts_with(&some.text));
        assert!(none.text.is_empty());
    }
}
