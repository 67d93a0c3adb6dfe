//! What each element means to the extractor: which tags carry links, which
//! hide their text or switch the tokenizer into raw text, which end foreign
//! content or break words, and which of their attributes are captured.

use html5gum::State;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tag {
    A,
    Area,
    Link,
    Frame,
    IFrame,
    Base,
    Meta,
    Title,
    Heading,
    // Raw-text elements whose content is hidden.
    Script,
    Style,
    NoEmbed,
    NoFrames,
    // Raw-text / RCDATA / plaintext elements whose content is visible.
    Textarea,
    Xmp,
    Plaintext,
    // Markup-containing elements whose content is hidden.
    NoScript,
    Template,
    Nav,
    Footer,
    Svg,
    // Foreign content that stays visible.
    Math,
    ForeignObject,
    /// Renders on its own line, so adjacent text must not be glued together.
    Block,
    Other,
}

pub(super) fn classify(name: &[u8]) -> Tag {
    // html5gum lower-cases tag names, so exact byte matches suffice.
    match name {
        b"a" => Tag::A,
        b"area" => Tag::Area,
        b"link" => Tag::Link,
        b"frame" => Tag::Frame,
        b"iframe" => Tag::IFrame,
        b"base" => Tag::Base,
        b"meta" => Tag::Meta,
        b"title" => Tag::Title,
        b"h1" | b"h2" | b"h3" | b"h4" | b"h5" | b"h6" => Tag::Heading,
        b"script" => Tag::Script,
        b"style" => Tag::Style,
        b"noembed" => Tag::NoEmbed,
        b"noframes" => Tag::NoFrames,
        b"textarea" => Tag::Textarea,
        b"xmp" => Tag::Xmp,
        b"plaintext" => Tag::Plaintext,
        b"noscript" => Tag::NoScript,
        b"template" => Tag::Template,
        b"nav" => Tag::Nav,
        b"footer" => Tag::Footer,
        b"svg" => Tag::Svg,
        b"math" => Tag::Math,
        b"foreignobject" => Tag::ForeignObject,
        b"address" | b"article" | b"aside" | b"blockquote" | b"body" | b"br" | b"button"
        | b"caption" | b"center" | b"dd" | b"details" | b"dialog" | b"dir" | b"div" | b"dl"
        | b"dt" | b"fieldset" | b"figcaption" | b"figure" | b"form" | b"frameset" | b"head"
        | b"header" | b"hgroup" | b"hr" | b"html" | b"legend" | b"li" | b"listing" | b"main"
        | b"menu" | b"ol" | b"optgroup" | b"option" | b"p" | b"pre" | b"section" | b"select"
        | b"summary" | b"table" | b"tbody" | b"td" | b"tfoot" | b"th" | b"thead" | b"tr"
        | b"ul" => Tag::Block,
        _ => Tag::Other,
    }
}

/// Whether text on either side of this tag is separate words.
pub(super) fn breaks_words(tag: Tag) -> bool {
    // Script and style are hidden inline content: "foo<script>..</script>bar" renders "foobar".
    !matches!(
        tag,
        Tag::A
            | Tag::Area
            | Tag::Link
            | Tag::Base
            | Tag::Meta
            | Tag::Math
            | Tag::Script
            | Tag::Style
            | Tag::Other
    )
}

/// HTML start tags that end svg/math foreign content (WHATWG "in foreign content").
pub(super) fn breaks_out_of_foreign(name: &[u8]) -> bool {
    matches!(
        name,
        b"b" | b"big"
            | b"blockquote"
            | b"body"
            | b"br"
            | b"center"
            | b"code"
            | b"dd"
            | b"div"
            | b"dl"
            | b"dt"
            | b"em"
            | b"embed"
            | b"h1"
            | b"h2"
            | b"h3"
            | b"h4"
            | b"h5"
            | b"h6"
            | b"head"
            | b"hr"
            | b"i"
            | b"img"
            | b"li"
            | b"listing"
            | b"menu"
            | b"meta"
            | b"nobr"
            | b"ol"
            | b"p"
            | b"pre"
            | b"ruby"
            | b"s"
            | b"small"
            | b"span"
            | b"strong"
            | b"strike"
            | b"sub"
            | b"sup"
            | b"table"
            | b"tt"
            | b"u"
            | b"ul"
            | b"var"
    )
}

/// Tokenizer state a start tag switches to, as the tree builder would (scripting enabled for
/// script, but noscript is parsed as markup so that its links are seen).
pub(super) fn state_after(tag: Tag) -> Option<State> {
    match tag {
        Tag::Title | Tag::Textarea => Some(State::RcData),
        Tag::Script => Some(State::ScriptData),
        Tag::Style | Tag::Xmp | Tag::IFrame | Tag::NoEmbed | Tag::NoFrames => Some(State::RawText),
        Tag::Plaintext => Some(State::PlainText),
        _ => None,
    }
}

/// Attributes we capture; everything else is ignored without copying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Attr {
    Href,
    Rel,
    Src,
    Name,
    Content,
    Class,
    Id,
    Role,
}

pub(super) fn attr_of(tag: Tag, name: &[u8]) -> Option<Attr> {
    match (tag, name) {
        (Tag::A | Tag::Area | Tag::Link | Tag::Base, b"href") => Some(Attr::Href),
        (Tag::A | Tag::Area | Tag::Link, b"rel") => Some(Attr::Rel),
        (Tag::Frame | Tag::IFrame, b"src") => Some(Attr::Src),
        (Tag::Meta | Tag::A, b"name") => Some(Attr::Name),
        (Tag::Meta, b"content") => Some(Attr::Content),
        // What a block says it is (main content or chrome: `boilerplate`).
        (Tag::Block, b"class") => Some(Attr::Class),
        // Also where a link into the page goes (a section's anchor).
        (_, b"id") => Some(Attr::Id),
        (Tag::Block, b"role") => Some(Attr::Role),
        _ => None,
    }
}
