#!/bin/sh
# scripts/fetch-model.sh against a local HTTP server on 127.0.0.1 that serves
# the golden e2e checkpoint under the Hugging Face URL layout (with HEAD and
# byte ranges): a full fetch, a resumed fetch of a partial file, an optional
# file the server lacks, and the offline message. Needs python3 for the server.
set -u
cd "$(dirname "$0")/../.."
ok() { echo "ok $1"; }
fail() { echo "FAIL $1: $2"; }
if ! command -v python3 >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
    echo "SKIP fetch_model: needs python3 and curl for the local test server"
    exit 0
fi
T=$(mktemp -d /tmp/qtts-fetch-XXXXXX)
trap 'kill $SRV 2>/dev/null; rm -rf "$T"' EXIT
ROOT="$T/www/Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice/resolve/main"
mkdir -p "$ROOT"
SRC="$(pwd)/tests/golden/data/e2e_string"
for f in config.json generation_config.json model.safetensors vocab.json merges.txt tokenizer_config.json speech_tokenizer; do
    ln -s "$SRC/$f" "$ROOT/$f"
done
cat > "$T/srv.py" <<'PY'
import http.server, os, sys, re
root = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def _file(self):
        p = os.path.realpath(os.path.join(root, self.path.lstrip('/')))
        return p if os.path.isfile(p) else None
    def do_HEAD(self):
        p = self._file()
        if not p: self.send_response(404); self.send_header('Content-Length', '0'); self.end_headers(); return
        self.send_response(200); self.send_header('Content-Length', str(os.path.getsize(p))); self.end_headers()
    def do_GET(self):
        p = self._file()
        if not p: self.send_response(404); self.send_header('Content-Length', '0'); self.end_headers(); return
        data = open(p, 'rb').read(); start = 0
        m = re.match(r'bytes=(\d+)-', self.headers.get('Range', ''))
        if m:
            start = int(m.group(1)); self.send_response(206)
            self.send_header('Content-Range', 'bytes %d-%d/%d' % (start, len(data) - 1, len(data)))
        else: self.send_response(200)
        self.send_header('Content-Length', str(len(data) - start)); self.end_headers(); self.wfile.write(data[start:])
s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
open(sys.argv[2], 'w').write(str(s.server_address[1])); s.serve_forever()
PY
python3 "$T/srv.py" "$T/www" "$T/port" & SRV=$!
i=0; while [ ! -s "$T/port" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
PORT=$(cat "$T/port" 2>/dev/null)
[ -n "$PORT" ] || { fail fetch_model_server "the local test server did not start"; exit 1; }
export QTTS_HF_ENDPOINT="http://127.0.0.1:$PORT"
D="$T/model"
if sh scripts/fetch-model.sh 0.6B-CustomVoice "$D" > "$T/out" 2>&1 && cmp -s "$D/model.safetensors" "$SRC/model.safetensors" &&
   cmp -s "$D/speech_tokenizer/model.safetensors" "$SRC/speech_tokenizer/model.safetensors" && grep -q "is ready" "$T/out" &&
   grep -q "preprocessor_config.json not offered" "$T/out"; then
    ok fetch_model_full
else
    fail fetch_model_full "$(tail -5 "$T/out")"
fi
# resume: keep the first 1000 bytes of the big file as a .part
rm "$D/model.safetensors"; head -c 1000 "$SRC/model.safetensors" > "$D/model.safetensors.part"
if sh scripts/fetch-model.sh 0.6B-CustomVoice "$D" > "$T/out" 2>&1 && cmp -s "$D/model.safetensors" "$SRC/model.safetensors" &&
   grep -q "config.json already complete" "$T/out" && [ ! -e "$D/model.safetensors.part" ]; then
    ok fetch_model_resume
else
    fail fetch_model_resume "$(tail -5 "$T/out")"
fi
# offline: a closed port
kill $SRV 2>/dev/null; wait $SRV 2>/dev/null
sh scripts/fetch-model.sh 0.6B-CustomVoice "$T/off" > "$T/out" 2>&1; rc=$?
if [ $rc -eq 3 ] && grep -q "cannot reach" "$T/out" && grep -q "speech_tokenizer/model.safetensors" "$T/out" &&
   grep -q -- "--model DIR" "$T/out"; then
    ok fetch_model_offline
else
    fail fetch_model_offline "exit $rc: $(cat "$T/out")"
fi
sh scripts/fetch-model.sh 9B-Nope > "$T/out" 2>&1; rc=$?
if [ $rc -eq 2 ] && grep -q "unknown model" "$T/out"; then ok fetch_model_unknown; else fail fetch_model_unknown "exit $rc"; fi
