//! Main content and boilerplate: which blocks of a page's visible text are
//! the page's own and which are the site's chrome (menus, sidebars,
//! breadcrumbs, related links, banners, footers).
//!
//! The signals content extractors use, read as the tokens stream by (no
//! DOM): the page's own marking (`<main>`, `<article>`, ARIA roles), the
//! names sites give their chrome (`class`/`id` tokens such as `sidebar`,
//! `navheader`, `breadcrumb`, `related`), and link density (a block whose
//! text is mostly link text is a menu or a link list, wherever it is).
//!
//! [`Regions`] follows the open containers; [`Blocks`] cuts the visible
//! text into blocks at block-element boundaries and keeps each block's byte
//! range when it is content. The page's text is then its main region's
//! blocks when it marks one, else every content block; when that would
//! leave almost nothing (a page that is all links, or marked oddly), the
//! whole visible text stays.

use super::outline::Kept;
use std::ops::Range;

/// Open containers tracked, at most: deeper nesting is not followed (its
/// text counts as its nearest tracked ancestor's).
const MAX_OPEN: usize = 256;

/// What a container says about the text inside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Region {
    /// The page marks it as its main content.
    Main,
    /// Site chrome.
    Boilerplate,
    Neutral,
}

/// Block elements the rules know by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BlockName {
    Main,
    Article,
    Aside,
    Header,
    /// `<html>`, `<body>`: never chrome, whatever their class says
    /// (`<body class="has-sidebar">`).
    Root,
    /// `<br>`, `<hr>`: no content, no end tag.
    Void,
    /// Elements whose end tag is implied by a sibling (`li`, `p`, `td` …).
    Li,
    P,
    Cell,
    Row,
    Term,
    Section,
    Other(u64),
}

impl BlockName {
    pub(super) fn of(name: &[u8]) -> Self {
        match name {
            b"main" => Self::Main,
            b"article" => Self::Article,
            b"aside" => Self::Aside,
            b"header" => Self::Header,
            b"html" | b"body" => Self::Root,
            b"br" | b"hr" => Self::Void,
            b"li" => Self::Li,
            b"p" => Self::P,
            b"td" | b"th" => Self::Cell,
            b"tr" => Self::Row,
            b"dt" | b"dd" => Self::Term,
            b"section" => Self::Section,
            _ => Self::Other(name.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            })),
        }
    }
}

/// The region a container opens, from its name and its `class`, `id` and
/// `role` attributes.
pub(super) fn region_of(name: BlockName, class: &str, id: &str, role: &str) -> Region {
    let role = role.trim();
    let is = |r: &str| role.eq_ignore_ascii_case(r);
    if is("main") || is("article") {
        return Region::Main;
    }
    if [
        "navigation",
        "banner",
        "contentinfo",
        "complementary",
        "search",
        "menu",
        "menubar",
        "toolbar",
    ]
    .iter()
    .any(|r| is(r))
    {
        return Region::Boilerplate;
    }
    match name {
        BlockName::Main | BlockName::Article => return Region::Main,
        BlockName::Aside => return Region::Boilerplate,
        BlockName::Root | BlockName::Void => return Region::Neutral,
        _ => {}
    }
    if class
        .split_ascii_whitespace()
        .chain(id.split_ascii_whitespace())
        .any(is_chrome_name)
    {
        return Region::Boilerplate;
    }
    if id.eq_ignore_ascii_case("content") || id.eq_ignore_ascii_case("main-content") {
        return Region::Main;
    }
    Region::Neutral
}

/// Words sites name their chrome with, as whole parts of a `class` or `id`
/// token (`site-footer`, `related_links`).
const CHROME_PARTS: &[&str] = &[
    "nav",
    "navbar",
    "menu",
    "sidebar",
    "footer",
    "masthead",
    "breadcrumb",
    "breadcrumbs",
    "related",
    "cookie",
    "cookies",
    "consent",
    "banner",
    "share",
    "social",
    "skip",
    "pagination",
    "pager",
    "newsletter",
    "subscribe",
    "advert",
    "sponsor",
    "popup",
    "toolbar",
];

/// Prefixes and infixes that mark chrome inside one word (`navheader`,
/// `navfooter`, `sphinxsidebar`, `sidebarwrapper`, `mainmenu`).
const CHROME_INFIXES: &[&str] = &["sidebar", "footer", "breadcrumb", "cookie", "menu"];

fn is_chrome_name(token: &str) -> bool {
    // Most class names are lower case already: no copy for them.
    let lower;
    let token = if token.bytes().any(|b| b.is_ascii_uppercase()) {
        lower = token.to_ascii_lowercase();
        lower.as_str()
    } else {
        token
    };
    token.starts_with("nav")
        || token.ends_with("nav")
        || CHROME_INFIXES.iter().any(|w| token.contains(w))
        || token
            .split(['-', '_'])
            .any(|part| CHROME_PARTS.contains(&part))
}

/// The open containers: a stack with the end tags browsers imply (a `<li>`
/// closes the `<li>` before it, an end tag closes what was left open
/// inside it; an end tag nothing opened is ignored).
#[derive(Debug, Default)]
pub(super) struct Regions {
    open: Vec<(BlockName, Region)>,
    /// Open containers of each kind.
    main: u32,
    boilerplate: u32,
    /// Containers not tracked because [`MAX_OPEN`] were open.
    untracked: u32,
}

impl Regions {
    pub(super) fn open(&mut self, name: BlockName, region: Region) {
        if name == BlockName::Void {
            return;
        }
        if let Some(&(top, _)) = self.open.last() {
            let implied = match name {
                BlockName::Li => top == BlockName::Li,
                BlockName::Cell => top == BlockName::Cell,
                BlockName::Row => matches!(top, BlockName::Row | BlockName::Cell),
                BlockName::Term => top == BlockName::Term,
                // A block inside a paragraph closes it.
                _ => top == BlockName::P,
            };
            if implied {
                self.pop();
                if name == BlockName::Row && self.open.last().is_some_and(|t| t.0 == BlockName::Row)
                {
                    self.pop();
                }
            }
        }
        if self.open.len() >= MAX_OPEN {
            self.untracked += 1;
            return;
        }
        match region {
            Region::Main => self.main += 1,
            Region::Boilerplate => self.boilerplate += 1,
            Region::Neutral => {}
        }
        self.open.push((name, region));
    }

    pub(super) fn close(&mut self, name: BlockName) {
        if self.untracked > 0 {
            self.untracked -= 1;
            return;
        }
        if let Some(at) = self.open.iter().rposition(|(n, _)| *n == name) {
            while self.open.len() > at {
                self.pop();
            }
        }
    }

    fn pop(&mut self) {
        match self.open.pop() {
            Some((_, Region::Main)) => self.main -= 1,
            Some((_, Region::Boilerplate)) => self.boilerplate -= 1,
            _ => {}
        }
    }

    pub(super) fn in_main(&self) -> bool {
        self.main > 0
    }

    pub(super) fn in_boilerplate(&self) -> bool {
        self.boilerplate > 0
    }
}

/// A block whose link text is more than this share of its text is a link
/// list (a menu, a table of contents, "see also").
const MAX_LINK_SHARE: f32 = 0.5;

/// The content blocks of the visible text, as byte ranges of it.
#[derive(Debug, Default)]
pub(super) struct Blocks {
    start: usize,
    link_bytes: usize,
    text_bytes: usize,
    /// Content blocks in page order, and whether each is in the main region.
    kept: Vec<(Range<usize>, bool)>,
}

impl Blocks {
    /// Text of the current block was read (`link`: inside a link).
    pub(super) fn text(&mut self, bytes: usize, link: bool) {
        self.text_bytes += bytes;
        if link {
            self.link_bytes += bytes;
        }
    }

    /// The current block ends where the visible text is `end` bytes long;
    /// `regions` are those its text was read in.
    pub(super) fn end(&mut self, end: usize, regions: &Regions) {
        let range = self.start..end;
        let links = self.link_bytes as f32 > MAX_LINK_SHARE * self.text_bytes as f32;
        if !range.is_empty() && !links && !regions.in_boilerplate() {
            self.kept.push((range, regions.in_main()));
        }
        self.start = end;
        self.link_bytes = 0;
        self.text_bytes = 0;
    }

    /// The page's own text out of its visible `text`, at most `limit`
    /// bytes: its main region's blocks when they hold
    /// [`MIN_CONTENT_BYTES`] or more, else all its content blocks; all of
    /// `text` when those hold less than that and less than a tenth of it.
    /// With it, the parts of `text` it holds, in order.
    pub(super) fn content(self, text: String, limit: usize) -> (String, Vec<Kept>) {
        let main: usize = self.kept.iter().filter(|b| b.1).map(|b| b.0.len()).sum();
        let only_main = main >= MIN_CONTENT_BYTES;
        let ranges: Vec<&Range<usize>> = self
            .kept
            .iter()
            .filter(|b| b.1 || !only_main)
            .map(|b| &b.0)
            .collect();
        let kept: usize = ranges.iter().map(|r| r.len()).sum();
        if kept < MIN_CONTENT_BYTES && kept * 10 < text.len() {
            let mut text = text;
            text.truncate(text.floor_char_boundary(limit));
            let whole = Kept {
                visible: 0,
                own: 0,
                len: text.len(),
            };
            return (text, vec![whole]);
        }
        let mut out = String::with_capacity(kept.min(limit));
        let mut parts = Vec::with_capacity(ranges.len());
        for r in ranges {
            let whole = &text[(*r).clone()];
            let part = whole.trim();
            if part.is_empty() {
                continue;
            }
            let lead = whole.len() - whole.trim_start().len();
            let space = usize::from(!out.is_empty());
            let room = limit.saturating_sub(out.len() + space);
            let part = if part.len() > room {
                part[..part.floor_char_boundary(room)].trim_end()
            } else {
                part
            };
            if part.is_empty() {
                break;
            }
            if space == 1 {
                out.push(' ');
            }
            parts.push(Kept {
                visible: r.start + lead,
                own: out.len(),
                len: part.len(),
            });
            out.push_str(part);
            if out.len() + 1 >= limit {
                break;
            }
        }
        (out, parts)
    }
}

/// Content under this many bytes is too little to stand for the page.
pub(super) const MIN_CONTENT_BYTES: usize = 200;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chrome_is_named_by_classes_ids_and_roles() {
        let r = |name: &[u8], class: &str, id: &str, role: &str| {
            region_of(BlockName::of(name), class, id, role)
        };
        assert_eq!(r(b"div", "sphinxsidebar", "", ""), Region::Boilerplate);
        assert_eq!(r(b"div", "related", "", "navigation"), Region::Boilerplate);
        assert_eq!(r(b"div", "navheader", "", ""), Region::Boilerplate);
        assert_eq!(r(b"div", "navfooter", "", ""), Region::Boilerplate);
        assert_eq!(r(b"div", "site-footer dark", "", ""), Region::Boilerplate);
        assert_eq!(r(b"ul", "", "main-menu", ""), Region::Boilerplate);
        assert_eq!(r(b"div", "cookie_banner", "", ""), Region::Boilerplate);
        assert_eq!(r(b"div", "body", "", "main"), Region::Main);
        assert_eq!(r(b"div", "", "content", ""), Region::Main);
        assert_eq!(r(b"article", "post", "", ""), Region::Main);
        assert_eq!(r(b"aside", "", "", ""), Region::Boilerplate);
        // Words that merely contain chrome's letters are content.
        assert_eq!(r(b"div", "canvas-wrapper", "", ""), Region::Neutral);
        assert_eq!(
            r(b"div", "section", "relational-model", ""),
            Region::Neutral
        );
        assert_eq!(r(b"div", "sharpness", "", ""), Region::Neutral);
        // The document itself is never chrome.
        assert_eq!(r(b"body", "has-sidebar", "", ""), Region::Neutral);
    }

    #[test]
    fn implied_end_tags_and_stray_ones() {
        let mut r = Regions::default();
        r.open(BlockName::of(b"div"), Region::Boilerplate);
        r.open(BlockName::Li, Region::Neutral);
        r.open(BlockName::Li, Region::Neutral);
        assert_eq!(r.open.len(), 2, "the second <li> closed the first");
        r.close(BlockName::of(b"section"));
        assert!(r.in_boilerplate(), "a stray end tag closes nothing");
        r.close(BlockName::of(b"div"));
        assert!(
            !r.in_boilerplate(),
            "</div> closed the <li> left open in it"
        );
        assert!(r.open.is_empty());
        r.open(BlockName::Main, Region::Main);
        r.open(BlockName::P, Region::Neutral);
        r.open(BlockName::of(b"div"), Region::Neutral);
        assert_eq!(r.open.len(), 2, "a block closes the paragraph");
        assert!(r.in_main());
    }

    #[test]
    fn nesting_is_bounded() {
        let mut r = Regions::default();
        let div = BlockName::of(b"div");
        for _ in 0..10_000 {
            r.open(div, Region::Boilerplate);
        }
        assert_eq!(r.open.len(), MAX_OPEN);
        for _ in 0..10_000 {
            r.close(div);
        }
        assert!(!r.in_boilerplate());
    }

    #[test]
    fn link_lists_are_dropped_and_main_wins() {
        let r = Regions::default();
        // Blocks: a menu (all links), a paragraph with a link, a sidebar line.
        let (menu, para) = (
            "Menu Home Docs Blog",
            "Real paragraph of the page with a link inside it.",
        );
        let text = format!("{menu} {para} Sidebar words");
        let mut b = Blocks::default();
        b.text(menu.len(), true);
        b.end(menu.len(), &r);
        b.text(para.len() - 4, false);
        b.text(4, true);
        b.end(menu.len() + 1 + para.len(), &r);
        b.text(14, false);
        b.end(text.len(), &r);
        assert_eq!(
            b.content(text.clone(), usize::MAX).0,
            format!("{para} Sidebar words")
        );

        // A page of nothing but links keeps its text whole.
        let links = "a b c ".repeat(100);
        let mut b = Blocks::default();
        b.text(links.len(), true);
        b.end(links.len(), &r);
        assert_eq!(b.content(links.clone(), usize::MAX).0, links);

        // The main region's blocks win over the rest; the limit holds.
        let body = "x ".repeat(150);
        let text = format!("Intro words {body}");
        let intro_then_main = || {
            let mut regions = Regions::default();
            let mut b = Blocks::default();
            b.text(11, false);
            b.end(11, &regions);
            regions.open(BlockName::Main, Region::Main);
            b.text(body.len(), false);
            b.end(text.len(), &regions);
            b
        };
        assert_eq!(
            intro_then_main().content(text.clone(), usize::MAX).0,
            body.trim()
        );
        assert_eq!(
            intro_then_main().content(text.clone(), 21).0,
            "x x x x x x x x x x x"
        );

        // A short main region: the page's other content blocks join it,
        // its chrome still does not.
        let (title, main, side) = ("csv — CSV Files", "y ".repeat(60), "Previous topic tarfile");
        let text = format!("{title} {main}{side}");
        let mut regions = Regions::default();
        let mut b = Blocks::default();
        b.text(title.len(), false);
        b.end(title.len(), &regions);
        regions.open(BlockName::Main, Region::Main);
        b.text(main.len(), false);
        b.end(title.len() + 1 + main.len(), &regions);
        regions.close(BlockName::Main);
        regions.open(BlockName::Aside, Region::Boilerplate);
        b.text(side.len(), false);
        b.end(text.len(), &regions);
        assert_eq!(
            b.content(text, usize::MAX).0,
            format!("{title} {}", main.trim())
        );
    }
}
