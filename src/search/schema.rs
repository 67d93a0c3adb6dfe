//! The two tantivy schemas (pages, anchors), their text analyzers, and the
//! URL-to-words rule.

use rustc_hash::FxHashMap;
use tantivy::Index;
use tantivy::schema::{
    FAST, Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{
    AsciiFoldingFilter, LowerCaser, RemoveLongFilter, SimpleTokenizer, StopWordFilter,
    TextAnalyzer, Token, TokenStream, Tokenizer,
};

/// Analyzer of every ranked text field: words, lower-cased, ASCII-folded,
/// stop words removed (positions kept, so phrases still line up), stemmed.
pub(crate) const ENGLISH: &str = "wc_en";
/// Analyzer of the spelling vocabulary: like [`ENGLISH`] but not stemmed, so
/// a correction is a real word.
pub(crate) const SPELL: &str = "wc_spell";
/// [`ENGLISH`] for the pages' URL words, which are not in the spelling
/// vocabulary (in the pages index, [`ENGLISH`] gathers the vocabulary).
pub(crate) const ENGLISH_URL: &str = "wc_en_url";
/// The value of a page's `spell` field: its words are those its title,
/// headings and body gave (see [`register_analyzers`]).
pub(crate) const SPELL_FROM_TEXT: &str = "\u{1}";

/// Tokens longer than this (base64, hashes) are not indexed.
const MAX_TOKEN_LEN: usize = 40;

/// English stop words: Lucene's list plus the question words and pronouns
/// of questions ("how do I …"), which say nothing about the answer. A page
/// titled "How to …" then gains nothing over the page that answers.
pub(crate) const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with", // Lucene's EnglishAnalyzer
    "how", "what", "why", "when", "where", "which", "who", "whom", "whose", "do", "does", "did",
    "can", "could", "should", "would", "i", "me", "my", "you", "your", "we", "our", "its", "am",
    "been", "has", "have", "had", "were",
];

/// The word tokenizer shared by all analyzers (and by query parsing).
pub(crate) fn words_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(MAX_TOKEN_LEN))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .build()
}

fn stop_words() -> StopWordFilter {
    StopWordFilter::remove(STOP_WORDS.iter().map(|w| (*w).to_string()))
}

pub(crate) fn english_analyzer() -> TextAnalyzer {
    english(false)
}

/// [`words_analyzer`], then stop words dropped and the rest stemmed; with
/// `gather`, each word (unstemmed) is also gathered into [`PAGE_WORDS`].
fn english(gather: bool) -> TextAnalyzer {
    TextAnalyzer::from(EnglishWords {
        gather,
        stemmer: frostem::Stemmer::new(frostem::Algorithm::English),
        fold: words_analyzer(),
        cache: FxHashMap::default(),
        token: Token::default(),
    })
}

/// [`words_analyzer`] with stop words and stemming, in one pass over the
/// text from a cache of the words seen: a word (as written) is looked up
/// once and the cache answers whether it is kept, what it folds to and
/// what its stem is, and whether this page gave it already. The filter
/// chain this replaced copied each token three times and looked it up
/// once per filter; tokenizing was a fifth of the indexing CPU, stemming
/// a third before the cache. Each analyzer clone (one per field and
/// indexing thread) has its own cache, emptied when it reaches
/// [`STEM_CACHE_WORDS`].
#[derive(Clone)]
struct EnglishWords {
    gather: bool,
    stemmer: frostem::Stemmer,
    /// Lower-cases and folds a word the cache lacks (the rare path).
    fold: TextAnalyzer,
    cache: FxHashMap<String, KnownWord>,
    token: Token,
}

/// At most this many words per cache (a few MB).
const STEM_CACHE_WORDS: usize = 100_000;

/// What the cache knows of a word as written.
#[derive(Clone, Debug)]
struct KnownWord {
    /// The word lower-cased and folded (what the spelling vocabulary gets).
    word: String,
    /// `None` for a stop word.
    stem: Option<String>,
    /// The [`PAGE_EPOCH`] of the page that last gave the word.
    page: u64,
}

impl Tokenizer for EnglishWords {
    type TokenStream<'a> = EnglishWordsStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        if self.cache.len() >= STEM_CACHE_WORDS {
            self.cache.clear();
        }
        self.token.reset();
        EnglishWordsStream {
            text,
            at: 0,
            // A field's text is one page's: the epoch holds while it is read.
            page: self.gather.then(|| PAGE_EPOCH.get()),
            words: self,
        }
    }
}

struct EnglishWordsStream<'a> {
    text: &'a str,
    /// Where the next word is looked for.
    at: usize,
    /// The page's epoch when gathering its words.
    page: Option<u64>,
    words: &'a mut EnglishWords,
}

/// The next run of alphanumeric chars in `text` from byte `at`, as
/// tantivy's `SimpleTokenizer` splits: ASCII by byte, the rest by char.
pub(crate) fn next_word(text: &str, mut at: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let alnum_at = |i: usize| -> (bool, usize) {
        let b = bytes[i];
        if b.is_ascii() {
            (b.is_ascii_alphanumeric(), 1)
        } else {
            let c = text[i..].chars().next().unwrap_or(' ');
            (c.is_alphanumeric(), c.len_utf8())
        }
    };
    while at < bytes.len() {
        let (alnum, len) = alnum_at(at);
        if alnum {
            let from = at;
            at += len;
            while at < bytes.len() {
                let (alnum, len) = alnum_at(at);
                if !alnum {
                    break;
                }
                at += len;
            }
            return Some((from, at));
        }
        at += len;
    }
    None
}

impl TokenStream for EnglishWordsStream<'_> {
    fn advance(&mut self) -> bool {
        let w = &mut *self.words;
        while let Some((from, to)) = next_word(self.text, self.at) {
            self.at = to;
            // Every word counts for positions, kept or not, as in tantivy's
            // filters (phrases still line up).
            w.token.position = w.token.position.wrapping_add(1);
            if to - from >= MAX_TOKEN_LEN {
                continue;
            }
            let raw = &self.text[from..to];
            let known = match w.cache.get_mut(raw) {
                Some(known) => known,
                None => {
                    let word = w
                        .fold
                        .token_stream(raw)
                        .next()
                        .map(|t| t.text.clone())
                        .unwrap_or_default();
                    let stem = (!word.is_empty() && !STOP_WORDS.contains(&word.as_str()))
                        .then(|| w.stemmer.stem(&word).into_owned());
                    w.cache.entry(raw.to_string()).or_insert(KnownWord {
                        word,
                        stem,
                        page: 0,
                    })
                }
            };
            let Some(stem) = &known.stem else {
                continue;
            };
            if let Some(page) = self.page
                && known.page != page
            {
                known.page = page;
                let word = known.word.clone();
                PAGE_WORDS.with_borrow_mut(|words| words.push(word));
            }
            w.token.text.clear();
            w.token.text.push_str(stem);
            w.token.offset_from = from;
            w.token.offset_to = to;
            return true;
        }
        false
    }

    fn token(&self) -> &Token {
        &self.words.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.words.token
    }
}

pub(crate) fn spell_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(MAX_TOKEN_LEN))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .filter(stop_words())
        .build()
}

/// Which of the two indexes analyzers are registered for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IndexPart {
    Pages,
    Anchors,
}

/// tantivy keeps analyzer names in the schema, not the analyzers: every
/// opened index needs them registered again.
///
/// In the pages index, a page's text is tokenized once for two fields:
/// [`ENGLISH`] (title, headings, body) also gathers the distinct words it
/// reads, before stemming, and [`SPELL`] given [`SPELL_FROM_TEXT`] hands
/// them to the spelling vocabulary, which keeps no frequencies and needs
/// each word once per page. tantivy indexes a document's fields on one
/// thread, in field order, and `spell` comes after the text fields, so
/// the words gathered are the page's own. Tokenizing the body a second
/// time for the vocabulary was a third of the indexing CPU.
pub(crate) fn register_analyzers(index: &Index, part: IndexPart) {
    let tokenizers = index.tokenizers();
    match part {
        IndexPart::Pages => {
            tokenizers.register(ENGLISH, english_gathering_analyzer());
            tokenizers.register(ENGLISH_URL, english_analyzer());
            tokenizers.register(SPELL, gathered_words_analyzer());
        }
        IndexPart::Anchors => {
            tokenizers.register(ENGLISH, english_analyzer());
            tokenizers.register(SPELL, spell_analyzer());
        }
    }
}

thread_local! {
    /// The words this indexing thread's current page gave so far (each
    /// once per field that gave it).
    static PAGE_WORDS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Which page this indexing thread is on: a word is gathered once per
    /// page (and field) by remembering the epoch of the page that last
    /// gave it. Starts at 1, so that no cached word has been gathered.
    static PAGE_EPOCH: std::cell::Cell<u64> = const { std::cell::Cell::new(1) };
}

/// [`ENGLISH`], gathering each word (unstemmed) into [`PAGE_WORDS`].
fn english_gathering_analyzer() -> TextAnalyzer {
    english(true)
}

/// The pages' [`SPELL`]: given [`SPELL_FROM_TEXT`], the words gathered
/// from the page's text (and [`PAGE_WORDS`] starts empty for the next
/// page); given any other text, that text's words.
#[derive(Clone)]
struct GatheredWords {
    words: TextAnalyzer,
    gathered: Vec<String>,
    token: Token,
}

fn gathered_words_analyzer() -> TextAnalyzer {
    TextAnalyzer::from(GatheredWords {
        words: spell_analyzer(),
        gathered: Vec::new(),
        token: Token::default(),
    })
}

impl Tokenizer for GatheredWords {
    type TokenStream<'a> = GatheredWordsStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        if text != SPELL_FROM_TEXT {
            return GatheredWordsStream::Text(self.words.token_stream(text));
        }
        self.gathered.clear();
        PAGE_WORDS.with_borrow_mut(|words| self.gathered.append(words));
        PAGE_EPOCH.set(PAGE_EPOCH.get() + 1);
        // A word the title and the body both gave was gathered twice.
        self.gathered.sort_unstable();
        self.gathered.dedup();
        GatheredWordsStream::Gathered {
            words: self.gathered.drain(..),
            token: &mut self.token,
            position: 0,
        }
    }
}

enum GatheredWordsStream<'a> {
    Text(tantivy::tokenizer::BoxTokenStream<'a>),
    Gathered {
        words: std::vec::Drain<'a, String>,
        token: &'a mut Token,
        position: usize,
    },
}

impl TokenStream for GatheredWordsStream<'_> {
    fn advance(&mut self) -> bool {
        match self {
            Self::Text(stream) => stream.advance(),
            Self::Gathered {
                words,
                token,
                position,
            } => match words.next() {
                Some(word) => {
                    token.text = word;
                    token.position = *position;
                    *position += 1;
                    true
                }
                None => false,
            },
        }
    }

    fn token(&self) -> &Token {
        match self {
            Self::Text(stream) => stream.token(),
            Self::Gathered { token, .. } => token,
        }
    }

    fn token_mut(&mut self) -> &mut Token {
        match self {
            Self::Text(stream) => stream.token_mut(),
            Self::Gathered { token, .. } => token,
        }
    }
}

fn text(tokenizer: &str, record: IndexRecordOption) -> TextOptions {
    TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(tokenizer)
            .set_index_option(record),
    )
}

/// Fields of the pages index: one document per page, keyed by `url`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PageFields {
    pub(crate) url: Field,
    pub(crate) title: Field,
    pub(crate) headings: Field,
    pub(crate) body: Field,
    /// The body's first bytes, stored: what snippets are cut from. `None`
    /// in an index made before it, whose `body` is stored whole.
    pub(crate) body_start: Option<Field>,
    pub(crate) url_words: Field,
    /// Unstemmed words of title, headings and body: the spelling vocabulary.
    pub(crate) spell: Field,
    pub(crate) out_links: Field,
    /// Words of the page's own text (body), for the hub penalty.
    pub(crate) words: Field,
    /// The page's passage vectors, packed (`crawl --semantic`); `None` in
    /// an index made before them.
    pub(crate) vectors: Option<Field>,
    /// The section of each of `vectors` (`embed::pack_sections`); `None`
    /// in an index made before vectors were of sections (of the page's
    /// opening then).
    pub(crate) vector_sections: Option<Field>,
    /// Where the body's sections start, as word positions
    /// (`sections::pack_starts`); `None` in an index made before them.
    pub(crate) section_starts: Option<Field>,
    /// The sections' headings, anchors and late openings, stored
    /// (`sections::pack_outline`); with `section_starts`.
    pub(crate) outline: Option<Field>,
}

impl PageFields {
    pub(crate) fn schema() -> Schema {
        let positions = IndexRecordOption::WithFreqsAndPositions;
        let mut b = Schema::builder();
        b.add_text_field("url", STRING | STORED | FAST);
        b.add_text_field("title", text(ENGLISH, positions).set_stored());
        b.add_text_field("headings", text(ENGLISH, positions));
        b.add_text_field("body", text(ENGLISH, positions));
        b.add_text_field("body_start", STORED);
        b.add_text_field("url_words", text(ENGLISH_URL, IndexRecordOption::WithFreqs));
        b.add_text_field("spell", text(SPELL, IndexRecordOption::Basic));
        b.add_u64_field("out_links", FAST);
        b.add_u64_field("words", FAST);
        b.add_bytes_field("vectors", FAST);
        b.add_bytes_field("vector_sections", FAST);
        b.add_bytes_field("section_starts", FAST);
        b.add_bytes_field("outline", STORED);
        b.build()
    }

    /// The fields of an existing schema; an error names the first missing one.
    pub(crate) fn of(schema: &Schema) -> Result<Self, String> {
        let f = Lookup::new(schema, "pages");
        Ok(Self {
            url: f.field("url")?,
            title: f.field("title")?,
            headings: f.field("headings")?,
            body: f.field("body")?,
            body_start: f.later("body_start"),
            url_words: f.field("url_words")?,
            spell: f.field("spell")?,
            out_links: f.field("out_links")?,
            words: f.field("words")?,
            vectors: f.later("vectors"),
            vector_sections: f.later("vector_sections"),
            section_starts: f.later("section_starts"),
            outline: f.later("outline"),
        })
    }
}

/// Fields of the anchors index: one document per (source, target) link.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AnchorFields {
    /// The linking page: what its next crawl's anchors replace.
    pub(crate) source: Field,
    /// The linked page's URL; its document frequency is the page's in-links.
    pub(crate) target: Field,
    pub(crate) text: Field,
    pub(crate) spell: Field,
    /// The words around each link in the linking page's text; `None` in
    /// an index made before it existed.
    pub(crate) context: Option<Field>,
}

impl AnchorFields {
    pub(crate) fn schema() -> Schema {
        let mut b = Schema::builder();
        b.add_text_field("source", STRING);
        b.add_text_field("target", STRING | FAST);
        b.add_text_field(
            "text",
            text(ENGLISH, IndexRecordOption::WithFreqsAndPositions),
        );
        b.add_text_field("spell", text(SPELL, IndexRecordOption::Basic));
        b.add_text_field("context", text(ENGLISH, IndexRecordOption::WithFreqs));
        b.build()
    }

    /// The fields of an existing schema; an error names the first missing one.
    pub(crate) fn of(schema: &Schema) -> Result<Self, String> {
        let f = Lookup::new(schema, "anchors");
        Ok(Self {
            source: f.field("source")?,
            target: f.field("target")?,
            text: f.field("text")?,
            spell: f.field("spell")?,
            context: f.later("context"),
        })
    }
}

/// The fields of an existing index's schema, by name: what `PageFields::of`
/// and `AnchorFields::of` read.
struct Lookup<'s> {
    schema: &'s Schema,
    /// The index's name, for the error.
    index: &'static str,
}

impl<'s> Lookup<'s> {
    fn new(schema: &'s Schema, index: &'static str) -> Self {
        Self { schema, index }
    }

    /// A field every index has; the error names it.
    fn field(&self, name: &str) -> Result<Field, String> {
        self.schema
            .get_field(name)
            .map_err(|_| format!("the {} index has no field {name:?}", self.index))
    }

    /// A field added in a later version: `None` in an index made before it.
    fn later(&self, name: &str) -> Option<Field> {
        self.schema.get_field(name).ok()
    }
}

/// Why `existing` (an index's schema) is not part of `current` (this
/// version's): the first field it has that `current` lacks or defines
/// otherwise; `None` when every field of it is in `current`, unchanged.
pub(crate) fn not_a_subset(existing: &Schema, current: &Schema) -> Option<String> {
    let earlier = earlier_forms();
    existing.fields().find_map(|(_, entry)| {
        let name = entry.name();
        match current.get_field(name) {
            Ok(f) if current.get_field_entry(f) == entry => None,
            Ok(_)
                if earlier
                    .get_field(name)
                    .is_ok_and(|f| earlier.get_field_entry(f) == entry) =>
            {
                None
            }
            Ok(_) => Some(format!("its field {name:?} is defined differently")),
            Err(_) => Some(format!(
                "it has a field {name:?} this version does not know"
            )),
        }
    })
}

/// Fields as earlier versions defined them, still read and written as they
/// are: the pages' `body` was stored whole before `body_start` held the
/// part snippets read (the stored text was a sixth of the indexing CPU and
/// most of the index; snippets never read past 24 KB).
fn earlier_forms() -> Schema {
    let mut b = Schema::builder();
    b.add_text_field(
        "body",
        text(ENGLISH, IndexRecordOption::WithFreqsAndPositions).set_stored(),
    );
    b.build()
}

/// The pages schema as versions before `body_start` made it.
#[cfg(test)]
pub(crate) fn pages_schema_with_the_body_stored() -> Schema {
    let earlier = earlier_forms();
    let mut b = Schema::builder();
    for (_, entry) in PageFields::schema().fields() {
        match entry.name() {
            "body_start" => {}
            name => {
                let entry = earlier
                    .get_field(name)
                    .map_or(entry, |f| earlier.get_field_entry(f));
                b.add_field(entry.clone());
            }
        }
    }
    b.build()
}

/// The words of a URL worth matching: host labels and path segments split
/// at punctuation and camelCase, without the scheme, `www` and file
/// extensions. `https://www.example.com/docs/getStarted.html` →
/// `example com docs get started`.
pub(crate) fn url_words(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let mut out = String::with_capacity(rest.len() + 8);
    for part in rest.split(|c: char| !c.is_alphanumeric()) {
        if part.is_empty()
            || matches!(
                part.to_ascii_lowercase().as_str(),
                "www" | "html" | "htm" | "php" | "asp" | "aspx" | "jsp"
            )
        {
            continue;
        }
        let mut prev_lower = false;
        for c in part.chars() {
            if c.is_uppercase() && prev_lower {
                out.push(' ');
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            out.push(c);
        }
        out.push(' ');
    }
    out.truncate(out.trim_end().len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(mut a: TextAnalyzer, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut stream = a.token_stream(text);
        while let Some(t) = stream.next() {
            out.push(t.text.clone());
        }
        out
    }

    #[test]
    fn english_stems_and_drops_stop_words() {
        assert_eq!(
            tokens(english_analyzer(), "How to bake the Breads, baking"),
            ["bake", "bread", "bake"]
        );
        assert_eq!(
            tokens(spell_analyzer(), "How to bake Breads"),
            ["bake", "breads"]
        );
    }

    #[test]
    fn cached_stems_are_the_stemmers_stems() {
        let text = "running runs ran runner connections connected connecting";
        let stemmer = frostem::Stemmer::new(frostem::Algorithm::English);
        let expected: Vec<String> = text
            .split(' ')
            .map(|w| stemmer.stem(w).into_owned())
            .collect();
        let mut a = english_analyzer();
        // The second pass is answered from the cache.
        assert_eq!(tokens(a.clone(), text), expected);
        let twice = format!("{text} {text}");
        let mut out = Vec::new();
        let mut stream = a.token_stream(&twice);
        while let Some(t) = stream.next() {
            out.push(t.text.clone());
        }
        assert_eq!(out, [expected.clone(), expected].concat());
    }

    /// Tokens as (text, position, offsets).
    fn full_tokens(mut a: TextAnalyzer, text: &str) -> Vec<(String, usize, usize, usize)> {
        let mut out = Vec::new();
        let mut stream = a.token_stream(text);
        while let Some(t) = stream.next() {
            out.push((t.text.clone(), t.position, t.offset_from, t.offset_to));
        }
        out
    }

    #[test]
    fn english_words_are_tantivys_filters_stop_words_and_stems() {
        // What the one-pass tokenizer stands for: tantivy's filter chain,
        // then stop words dropped and the rest stemmed.
        let text = format!(
            "The Quick-brown FOX's naïve café: Ünïcode ÆON straße, x86_64 \
             and 42nd {long} {long}s ﬁne 東京 tower; don't Running runs \
             the THE Émigré émigré ä{edge}",
            long = "a".repeat(MAX_TOKEN_LEN),
            edge = "b".repeat(MAX_TOKEN_LEN - 2),
        );
        let stemmer = frostem::Stemmer::new(frostem::Algorithm::English);
        let expected: Vec<_> = full_tokens(words_analyzer(), &text)
            .into_iter()
            .filter(|(t, ..)| !STOP_WORDS.contains(&t.as_str()))
            .map(|(t, p, from, to)| (stemmer.stem(&t).into_owned(), p, from, to))
            .collect();
        assert!(expected.len() > 20, "{expected:?}");
        let a = english_analyzer();
        assert_eq!(full_tokens(a.clone(), &text), expected);
        // Answered from the cache the second time.
        let twice = full_tokens(a.clone(), &format!("{text} {text}"));
        assert_eq!(twice[..expected.len()], expected[..]);
        assert_eq!(twice.len(), 2 * expected.len());
        assert_eq!(full_tokens(a, "").len(), 0);
    }

    #[test]
    fn an_index_without_the_anchor_context_is_still_usable() {
        let current = AnchorFields::schema();
        // The anchors schema before the context field.
        let mut b = Schema::builder();
        b.add_text_field("source", STRING);
        b.add_text_field("target", STRING | FAST);
        b.add_text_field(
            "text",
            text(ENGLISH, IndexRecordOption::WithFreqsAndPositions),
        );
        b.add_text_field("spell", text(SPELL, IndexRecordOption::Basic));
        let old = b.build();
        assert_eq!(not_a_subset(&old, &current), None);
        assert_eq!(not_a_subset(&current, &current), None);
        assert_eq!(AnchorFields::of(&old).unwrap().context, None);
        assert!(AnchorFields::of(&current).unwrap().context.is_some());
        // A field this version does not know, or defines otherwise: refused.
        let mut b = Schema::builder();
        b.add_text_field("source", STRING | STORED);
        let other = b.build();
        assert!(not_a_subset(&other, &current).unwrap().contains("source"));
        assert!(not_a_subset(&current, &old).unwrap().contains("context"));
    }

    #[test]
    fn an_index_with_the_body_stored_whole_is_still_usable() {
        let current = PageFields::schema();
        let old = pages_schema_with_the_body_stored();
        assert_eq!(not_a_subset(&old, &current), None);
        assert_eq!(PageFields::of(&old).unwrap().body_start, None);
        assert!(PageFields::of(&current).unwrap().body_start.is_some());
        // Stored or not, the body must be indexed as this version does.
        let mut b = Schema::builder();
        b.add_text_field(
            "body",
            text(ENGLISH, IndexRecordOption::WithFreqs).set_stored(),
        );
        assert!(not_a_subset(&b.build(), &current).unwrap().contains("body"));
    }

    #[test]
    fn url_words_split_host_path_and_camel_case() {
        assert_eq!(
            url_words("https://www.example.com/docs/getStarted.html?q=rust_lang"),
            "example com docs get Started q rust lang"
        );
        assert_eq!(url_words("not a url"), "not a url");
        assert_eq!(url_words(""), "");
    }
}
