#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/:
valid examples of each input and the hostile cases the unit tests hold.
Run from the repository root; needs sox for the audio seeds. The output is
committed; rerun only to change the seeds."""
import json, os, shutil, struct, subprocess, tempfile, zlib

OUT = "tests/fuzz/corpus"


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def st_file(tensors, header_extra=None, raw_header=None):
    """safetensors bytes of {name: (dtype, shape, bytes)}."""
    hdr, blob = {}, b""
    for name, (dt, shape, data) in tensors.items():
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if header_extra:
        hdr.update(header_extra)
    h = raw_header if raw_header is not None else json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + blob


def safetensors():
    f32 = struct.pack("<4f", 1, 2, 3, 4)
    one = st_file({"a.weight": ("F32", [2, 2], f32), "b": ("BF16", [3], b"\0\x3f" * 3),
                   "c": ("F16", [1, 1], b"\0\x3c")}, {"__metadata__": {"format": "pt"}})
    put("safetensors", "single", b"\0" + one)
    put("safetensors", "empty_tensor", b"\0" + st_file({"e": ("F32", [0, 4], b"")}))
    put("safetensors", "int_types", b"\0" + st_file({"i": ("I64", [1], b"\1" * 8), "u": ("U8", [2], b"\1\2")}))
    put("safetensors", "overlap", b"\0" + struct.pack("<Q", 90) +
        b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'[:90] + b"\0" * 4)
    put("safetensors", "past_end", b"\0" + st_file({}, raw_header=b'{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}'))
    put("safetensors", "huge_header_len", b"\0" + struct.pack("<Q", 1 << 62) + b"{}")
    put("safetensors", "shape_overflow", b"\0" + st_file({}, raw_header=b'{"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}}'))
    put("safetensors", "negative_dim", b"\0" + st_file({}, raw_header=b'{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}'))
    put("safetensors", "not_json", b"\0" + struct.pack("<Q", 5) + b"{nope")
    put("safetensors", "truncated", b"\0\x10\0\0")
    s1 = st_file({"x": ("F32", [2], struct.pack("<2f", 1, 2))})
    s2 = st_file({"y": ("BF16", [2], b"\0\x3f\0\x40")})
    idx = json.dumps({"metadata": {"total_size": 12}, "weight_map": {
        "x": "model-00001-of-00002.safetensors", "y": "model-00002-of-00002.safetensors"}}).encode()
    sep = b"\n==SHARD==\n"
    put("safetensors", "sharded", b"\1" + idx + sep + s1 + sep + s2)
    bad_idx = json.dumps({"weight_map": {"x": "model-00002-of-00002.safetensors", "z": "../../etc/passwd"}}).encode()
    put("safetensors", "sharded_bad_map", b"\1" + bad_idx + sep + s1 + sep + s2)
    put("safetensors", "sharded_missing", b"\1" + idx + sep + s1)


def config():
    sep = b"\n==GEN==\n"
    for case in ["e2e_string", "base_clone", "voice_design"]:
        d = "tests/golden/data/" + case
        c = open(d + "/config.json", "rb").read()
        g = open(d + "/generation_config.json", "rb").read()
        put("config", case, b"\0" + c + sep + g)
        put("config", case + "_load", b"\1" + c + sep + g)
    c = json.load(open("tests/golden/data/e2e_string/config.json"))
    t = c["talker_config"]
    bad = json.loads(json.dumps(c)); bad["talker_config"]["hidden_size"] = t["hidden_size"] * 2
    put("config", "hidden_mismatch_load", b"\1" + json.dumps(bad).encode())
    bad = json.loads(json.dumps(c)); bad["talker_config"]["num_attention_heads"] = 3
    put("config", "heads_mismatch_load", b"\1" + json.dumps(bad).encode())
    bad = json.loads(json.dumps(c)); bad["talker_config"]["vocab_size"] = 7
    put("config", "vocab_small", b"\0" + json.dumps(bad).encode())
    bad = json.loads(json.dumps(c)); bad["talker_config"]["codec_eos_token_id"] = 1 << 30
    put("config", "eos_out_of_range", b"\0" + json.dumps(bad).encode())
    bad = json.loads(json.dumps(c)); bad["talker_config"]["spk_id"] = {"x" * 100: 1}
    put("config", "long_speaker", b"\0" + json.dumps(bad).encode())
    put("config", "not_object", b"\0[1,2,3]")
    put("config", "gen_bad", b"\0" + json.dumps(c).encode() + sep + b'{"temperature": -1, "top_k": "x"}')


def tokenizer():
    texts = ["Hello, world! It's 3.14 o'clock.", "你好，世界。这是一个测试。", "Grüße aus Köln — naïve café",
             "<|im_start|>assistant\n<|im_end|><|tts_pad|>", "<|im_start", "  \t\n\n  ", "a" * 3000,
             "1234567890" * 50, "e\u0301 \u212b \ufb01", "😀👍🏽 emoji", "\u0000embedded\u0000nul"]
    for i, t in enumerate(texts):
        put("tokenizer", "t%02d" % i, b"\0" + t.encode())
        put("tokenizer", "alt%02d" % i, b"\1" + t.encode())
    for i, b in enumerate([b"\xff\xfe", b"abc\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"ok\xe2\x82"]):
        put("tokenizer", "bad%02d" % i, b"\0" + b)


def split():
    texts = ["One. Two! Three? Four…", "第一句。第二句！第三句？", "A line\nanother line\n\nnew paragraph.",
             "no punctuation at all but quite a lot of words that go on and on and on " * 8,
             "，".join(["子句"] * 60), "x" * 700, "Mr. Smith went to Washington. He said: \"hi.\"", "   ", ""]
    for i, t in enumerate(texts):
        put("split", "s%02d" % i, bytes([i * 37 % 256]) + t.encode())


def crc_file(body):
    return body + struct.pack("<I", zlib.crc32(body) & 0xFFFFFFFF)


def voice_bytes(icl, X=8, Q=4, F=2, ids=(5, 6, 7), text=b"hello", flags=None, version=1, size=b"0b6", primed=None):
    """primed: (key, ref_last, pos, kv_len, floats) of a version 2 ICL voice's primed decoder state."""
    if flags is None:
        flags = (1 if icl else 0) | (2 if primed else 0)
    b = b"QTTSVOIC" + struct.pack("<II", version, flags)
    b += b"base".ljust(16, b"\0") + size.ljust(16, b"\0")
    b += struct.pack("<IIII", X, Q, 2048, X) + struct.pack("<%df" % X, *[0.1 * i for i in range(X)])
    if icl:
        b += struct.pack("<I", F) + struct.pack("<%di" % (F * Q), *[(i * 7) % 2048 for i in range(F * Q)])
        b += struct.pack("<I", len(ids)) + struct.pack("<%di" % len(ids), *ids)
    else:
        b += struct.pack("<I", 0) + struct.pack("<I", 0)
    b += struct.pack("<I", len(text)) + text
    if primed:
        key, last, pos, kv, st = primed
        b += struct.pack("<QfqII", key, last, pos, kv, len(st)) + struct.pack("<%df" % len(st), *st)
    return crc_file(b)


def voice():
    put("voice", "xvector", voice_bytes(False, text=b""))
    put("voice", "icl", voice_bytes(True))
    put("voice", "icl_utf8", voice_bytes(True, text="参考文本".encode()))
    put("voice", "bad_crc", voice_bytes(True)[:-1] + b"\0")
    put("voice", "newer", voice_bytes(False, version=3))
    state = [0.25 * i - 1 for i in range(12)]
    put("voice", "v2_xvector", voice_bytes(False, text=b"", version=2))
    put("voice", "v2_icl", voice_bytes(True, version=2))
    put("voice", "v2_primed", voice_bytes(True, version=2, primed=(0x0123456789ABCDEF, 0.5, 2, 2, state)))
    put("voice", "v2_primed_utf8", voice_bytes(True, version=2, text="参考文本".encode(), primed=(7, -0.25, 40, 16, state[:3])))
    put("voice", "v1_primed_flag", voice_bytes(True, version=1, primed=(1, 0, 2, 2, state)))
    put("voice", "v2_primed_xvector", voice_bytes(False, version=2, flags=2, primed=(1, 0, 2, 2, state)))
    put("voice", "v2_primed_no_floats", voice_bytes(True, version=2, primed=(1, 0, 2, 2, [])))
    put("voice", "v2_primed_nan", voice_bytes(True, version=2, primed=(1, 0, 2, 2, [float("nan")] + state)))
    put("voice", "v2_primed_inf_last", voice_bytes(True, version=2, primed=(1, float("inf"), 2, 2, state)))
    put("voice", "v2_primed_negative_pos", voice_bytes(True, version=2, primed=(1, 0, -1, 2, state)))
    put("voice", "v2_primed_huge_count", crc_file(voice_bytes(True, version=2, primed=(1, 0, 2, 2, state))[:-4 - 4 * 12 - 4] +
                                                  struct.pack("<I", 0xFFFFFFFF)))
    put("voice", "v2_primed_truncated", voice_bytes(True, version=2, primed=(1, 0, 2, 2, state))[:-20])
    put("voice", "reserved_flag", voice_bytes(False, flags=2))
    put("voice", "truncated", voice_bytes(True)[:40])
    put("voice", "bad_text", voice_bytes(True, text=b"\xff\xfe"))
    put("voice", "trailing", voice_bytes(False) + b"x")
    put("voice", "big_count", crc_file(b"QTTSVOIC" + struct.pack("<II", 1, 1) + b"base".ljust(16, b"\0") +
                                     b"0b6".ljust(16, b"\0") + struct.pack("<IIII", 1, 64, 65536, 1) +
                                     struct.pack("<f", 1) + struct.pack("<I", 0xFFFFFFFF)))


def audio():
    tmp = tempfile.mkdtemp()
    try:
        for name, args in [("wav16", ["-b", "16", "-e", "signed"]), ("wav8", ["-b", "8", "-e", "unsigned"]),
                           ("wavf32", ["-b", "32", "-e", "floating-point"]), ("flac", []), ("ogg", []),
                           ("aiff", []), ("au", [])]:
            ext = {"wav16": "wav", "wav8": "wav", "wavf32": "wav"}.get(name, name)
            out = os.path.join(tmp, name + "." + ext)
            rate = "16000" if name != "ogg" else "22050"
            subprocess.run(["sox", "-n", "-r", rate, "-c", "2" if name == "flac" else "1"] + args +
                           [out, "synth", "0.05", "sine", "440"], check=True)
            put("audio", name, open(out, "rb").read())
        wav = open(os.path.join(tmp, "wav16.wav"), "rb").read()
        put("audio", "wav_truncated", wav[:60])
        put("audio", "wav_huge_rate", wav[:24] + struct.pack("<I", 0xFFFFFFFF) + wav[28:])
        put("audio", "wav_zero_channels", wav[:22] + b"\0\0" + wav[24:])
        put("audio", "not_audio", b"this is not audio at all")
        # an MPEG-1 layer III frame header followed by zeros (libsndfile >= 1.1 reads MP3)
        put("audio", "mp3_frame", (b"\xff\xfb\x90\x64" + b"\0" * 413) * 4)
        put("audio", "silent", wav[:44] + b"\0" * (len(wav) - 44))
    finally:
        shutil.rmtree(tmp)


def codes():
    row = " ".join(str((i * 131) % 2048) for i in range(16))
    put("codes", "two_frames", bytes([15]) + ("# frames\n%s\n%s\n" % (row, row)).encode())
    put("codes", "commas", bytes([15]) + (row.replace(" ", ", ") + "\r\n").encode())
    put("codes", "short_row", bytes([15]) + b"1 2 3\n")
    put("codes", "long_row", bytes([15]) + (row + " 5\n").encode())
    put("codes", "overflow", bytes([15]) + (" ".join(["99999999999999999999"] * 16) + "\n").encode())
    put("codes", "long_line", bytes([15]) + b"1 " * 3000 + b"\n")
    put("codes", "g1", bytes([0]) + b"1\n2\n3\n-4\n")
    put("codes", "empty", bytes([15]) + b"\n# nothing\n")


def speech():
    bodies = [{"model": "qtts", "input": "Hello there.", "voice": "ryan"},
              {"model": "qtts", "input": "Hi", "voice": "Ryan", "response_format": "wav", "stream_format": "sse",
               "language": "english", "seed": 5, "temperature": 0.7, "top_k": 30, "top_p": 0.9,
               "repetition_penalty": 1.05, "do_sample": True, "subtalker_temperature": 0.9, "subtalker_top_k": 10,
               "subtalker_top_p": 0.8, "subtalker_do_sample": False, "chunk_frames": 4, "first_chunk_frames": 1,
               "max_new_tokens": 50, "force_frames": 3, "text_mode": "streaming", "speed": 1.5,
               "instructions": "calm"},
              {"model": "qtts", "input": "x", "voice": "nobody"}, {"model": "", "input": "x"},
              {"model": "qtts", "input": "   "}, {"model": "qtts", "input": "x", "voice": "ryan", "bogus": 1},
              {"model": "qtts", "input": "x", "voice": "ryan", "speed": 100},
              {"model": "qtts", "input": "x", "voice": "ryan", "response_format": "ogg"},
              {"model": "qtts", "input": "x" * 2001, "voice": "ryan"},
              {"model": "qtts", "input": "x", "voice": "ryan", "top_k": 1.5},
              {"model": "qtts", "input": "x", "voice": "ryan", "seed": -1},
              {"model": "qtts", "input": "x", "voice": "ryan", "text_mode": "fast"}, [1, 2]]
    for i, b in enumerate(bodies):
        put("speech", "b%02d" % i, json.dumps(b, ensure_ascii=False))
    put("speech", "dup_key", '{"model":"a","model":"b","input":"x"}')
    put("speech", "truncated", '{"model":"qtts","input":"x')
    put("speech", "nul", '{"model":"qtts","input":"a\\u0000b","voice":"ryan"}')
    put("speech", "bad_utf8", b'{"model":"qtts","input":"\xff","voice":"ryan"}')


def http():
    def req(method, path, body=b"", headers=()):
        h = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1"] + list(headers)
        if body or method in ("POST", "PUT"):
            h.append("Content-Length: %d" % len(body))
        return ("\r\n".join(h) + "\r\n\r\n").encode() + body
    put("http", "health", req("GET", "/health"))
    put("http", "ready_head", req("HEAD", "/ready"))
    put("http", "metrics", req("GET", "/metrics"))
    put("http", "models_query", req("GET", "/v1/models?limit=3&x=%00%zz"))
    put("http", "voices", req("GET", "/v1/audio/voices"))
    put("http", "options", req("OPTIONS", "/v1/audio/speech", headers=["Origin: http://x"]))
    put("http", "wrong_method", req("PUT", "/v1/audio/speech", b"{}"))
    put("http", "unknown", req("GET", "/v2/nothing/../health"))
    put("http", "auth", req("GET", "/v1/models", headers=["Authorization: Bearer " + "k" * 200]))
    put("http", "too_large", req("POST", "/v1/audio/speech", headers=["Content-Length: 99999999999"])[:-4] + b"\r\n\r\n")
    for i, body in enumerate([{"model": "m", "input": "Hi.", "voice": "v1", "response_format": "wav"},
                              {"model": "m", "input": "Hi.", "voice": "v1", "stream_format": "sse",
                               "response_format": "pcm"},
                              {"model": "m", "input": "Hi.", "voice": "v1", "stream_format": "audio",
                               "response_format": "mp3", "speed": 2},
                              {"model": "m", "input": "Hi.", "voice": "nobody"}, {"model": "m"}]):
        put("http", "speech%d" % i, req("POST", "/v1/audio/speech", json.dumps(body).encode(),
                                         ["Content-Type: application/json"]))
    body = b'{"model":"m","input":"Hi.","voice":"v1","response_format":"flac"}'
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    put("http", "speech_chunked", b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        b"Content-Type: application/json\r\n\r\n" + chunked)
    tmp = tempfile.mkdtemp()
    try:
        wav = os.path.join(tmp, "ref.wav")
        subprocess.run(["sox", "-n", "-r", "24000", "-c", "1", "-b", "16", wav, "synth", "0.4", "sine", "300"],
                       check=True)
        audio = open(wav, "rb").read()
    finally:
        shutil.rmtree(tmp)
    def form(fields):
        b = b""
        for name, value, fname in fields:
            b += b"--BOUNDARY\r\nContent-Disposition: form-data; name=\"" + name.encode() + b"\""
            if fname:
                b += b"; filename=\"" + fname.encode() + b"\"\r\nContent-Type: audio/wav"
            b += b"\r\n\r\n" + value + b"\r\n"
        return b + b"--BOUNDARY--\r\n"
    ct = ["Content-Type: multipart/form-data; boundary=BOUNDARY"]
    put("http", "upload_xvector", req("POST", "/v1/audio/voices", form([("name", b"v1", None),
                                                                       ("audio", audio, "ref.wav")]), ct))
    put("http", "upload_icl", req("POST", "/v1/audio/voices", form([("name", b"v2", None), ("text", b"Hello there.", None),
                                                                   ("audio", audio, "ref.wav")]), ct))
    put("http", "upload_flags", req("POST", "/v1/audio/voices", form([("name", b"v3", None),
                                                                     ("xvector_only", b"maybe", None),
                                                                     ("audio", audio[:200], "x.wav")]), ct))
    put("http", "upload_bad_field", req("POST", "/v1/audio/voices", form([("nam", b"v4", None)]), ct))
    put("http", "upload_bad_name", req("POST", "/v1/audio/voices", form([("name", b"../etc", None),
                                                                        ("audio", b"RIFF", "a")]), ct))
    put("http", "upload_urlencoded", req("POST", "/v1/audio/voices", b"name=v5&audio=abc",
                                         ["Content-Type: application/x-www-form-urlencoded"]))
    put("http", "upload_truncated", req("POST", "/v1/audio/voices", form([("name", b"v6", None)])[:30], ct))
    put("http", "delete", req("DELETE", "/v1/audio/voices/v1"))
    put("http", "delete_bad", req("DELETE", "/v1/audio/voices/..%2f..%2fx"))
    put("http", "pipelined", req("GET", "/health") + req("GET", "/v1/models"))
    # the streaming-text WebSocket: the upgrade, then the session's frames (JSON messages) on the same bytes
    up = req("GET", "/v1/audio/speech/stream", headers=("Upgrade: websocket", "Connection: Upgrade",
                                                       "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
                                                       "Sec-WebSocket-Version: 13"))
    msgs = [{"type": "session.config", "voice": "v1", "response_format": "pcm", "force_frames": 2},
            {"type": "input.text", "text": "Hello there. "}, {"type": "input.text", "text": "Bye."},
            {"type": "input.done"}]
    put("http", "ws_session", up + b"".join(ws_frame(1, json.dumps(m).encode()) for m in msgs))
    put("http", "ws_close_at_once", up + b"".join(ws_frame(1, json.dumps(m).encode()) for m in msgs[:2]) +
        ws_frame(8, struct.pack(">H", 1000)))
    put("http", "ws_bad_messages", up + ws_frame(1, b"{nope") + ws_frame(1, b'{"type":"session.config","stream_audio":3}') +
        ws_frame(1, b'{"type":"input.text"}') + ws_frame(1, b'{"type":"what"}') + ws_frame(1, b"[1]") +
        ws_frame(2, b"\0"))
    put("http", "ws_fragmented", up + ws_frame(1, b'{"type":"input.te', fin=False) + ws_frame(9, b"p") +
        ws_frame(0, b'xt","text":"Hi."}') + ws_frame(1, b'{"type":"input.done"}'))
    put("http", "ws_no_key", req("GET", "/v1/audio/speech/stream", headers=("Upgrade: websocket", "Connection: Upgrade",
                                                                           "Sec-WebSocket-Version: 12")))



def ws_frame(op, payload, fin=True, mask=b"\x37\xfa\x21\x3d", masked=True, rsv=0, length_form=None):
    """A client WebSocket frame (RFC 6455 5.2); length_form 126/127 forces a longer length encoding."""
    n = len(payload)
    b = bytes([(0x80 if fin else 0) | rsv << 4 | op])
    m = 0x80 if masked else 0
    if length_form == 127 or (length_form is None and n >= 65536):
        b += bytes([m | 127]) + struct.pack(">Q", n)
    elif length_form == 126 or (length_form is None and n >= 126):
        b += bytes([m | 126]) + struct.pack(">H", n)
    else:
        b += bytes([m | n])
    if not masked:
        return b + payload
    return b + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(payload))


def ws():
    cfg = json.dumps({"type": "session.config", "voice": "ryan", "response_format": "pcm"}).encode()
    text = json.dumps({"type": "input.text", "text": "Hello there. How are you?"}).encode()
    put("ws", "config_text_done", b"\4" + ws_frame(1, cfg) + ws_frame(1, text) +
        ws_frame(1, b'{"type":"input.done"}') + ws_frame(8, struct.pack(">H", 1000)))
    put("ws", "fragmented", b"\4" + ws_frame(1, text[:10], fin=False) + ws_frame(9, b"ping") +
        ws_frame(0, text[10:20], fin=False) + ws_frame(0, text[20:]))
    put("ws", "ping_pong_close", b"\4" + ws_frame(9, b"") + ws_frame(10, b"x" * 125) + ws_frame(8, b""))
    put("ws", "len126", b"\4" + ws_frame(1, b"a" * 300))
    put("ws", "len127_small", b"\4" + ws_frame(1, b"b" * 40, length_form=127))
    put("ws", "len126_small", b"\4" + ws_frame(1, b"c" * 5, length_form=126))
    put("ws", "len_64k", b"\3" + ws_frame(1, b"d" * 65536))
    put("ws", "over_limit", b"\0" + ws_frame(1, b"e" * 126))
    put("ws", "unmasked", b"\4" + ws_frame(1, b"hi", masked=False))
    put("ws", "rsv_bits", b"\4" + ws_frame(1, b"hi", rsv=4))
    put("ws", "unknown_opcode", b"\4" + ws_frame(3, b"hi"))
    put("ws", "control_fragmented", b"\4" + ws_frame(9, b"hi", fin=False))
    put("ws", "control_too_long", b"\4" + ws_frame(9, b"p" * 126))
    put("ws", "binary", b"\4" + ws_frame(2, b"\0\1\2"))
    put("ws", "huge_length", b"\4" + b"\x81\xff" + struct.pack(">Q", 1 << 63) + b"\0" * 8)
    put("ws", "truncated", b"\4" + ws_frame(1, text)[:20])
    put("ws", "zero_mask", b"\4" + ws_frame(1, text, mask=b"\0\0\0\0"))


def tokstream():
    texts = ["Hello there. How are you?", "  leading and trailing spaces   ", "数字 123, 4567 和 标点。再来一句！",
             "It's a test<|im_end|> with <|im_start|> added tokens <|im_", "tabs\tand\nnew\r\nlines\n\n",
             "e\u0301 combining, \u00e9 composed, \uac00\u11a8 hangul", "emoji \U0001F600\U0001F3FB and ZWJ \u200d",
             "don't won't I'm we've", "\u3000full-width space\u3000", "x" * 300]
    for i, t in enumerate(texts):
        b = t.encode()
        put("tokstream", "text%d" % i, bytes([i * 4 % 256 | (i & 3), i * 7 % 64]) + b)
    put("tokstream", "one_byte_pieces", b"\2\0" + "Mixed 中文 and English.".encode())
    put("tokstream", "bad_utf8", b"\0\5" + b"abc \xff def")
    put("tokstream", "cut_utf8", b"\0\1" + "中".encode()[:2])
    put("tokstream", "overlong", b"\1\3" + b"\xc0\xaf")
    put("tokstream", "surrogate", b"\0\3" + b"\xed\xa0\x80")


def vocab():
    with open("tests/golden/data/e2e_string/vocab.json", encoding="utf-8") as f:
        full = json.load(f)
    items = list(full.items())
    small = dict(items[:200] + items[-50:])
    put("vocab", "flat_utf8", json.dumps(small, ensure_ascii=False))
    put("vocab", "flat_escaped", json.dumps(small, ensure_ascii=True, indent=2))
    put("vocab", "escapes", '{ "x\\u00e9": 5,"\\ud83d\\ude00":6 ,"\\n\\/\\\\\\"":7,\n"\u00e9t\\u00E9": 8,"":9}\n')
    for name, text in [("empty_object", "{}"), ("empty", ""), ("array", "[1, 2]"), ("string_id", '{"a": "x"}'),
                       ("negative_id", '{"a": -3}'), ("huge_id", '{"a": 99999999999}'),
                       ("fractional_id", '{"a": 1.0}'), ("exponent_id", '{"a": 1e2}'),
                       ("leading_zero", '{"a": 01}'), ("duplicate", '{"a": 1, "a": 2}'),
                       ("unpaired_surrogate", '{"a\\ud800": 1}'), ("low_surrogate", '{"\\udc00": 1}'),
                       ("nul_escape", '{"a\\u0000b": 1}'), ("control_byte", '{"a\x01": 1}'),
                       ("truncated", '{"a": 0,\n"b": '), ("trailing_comma", '{"a": 0,}'),
                       ("trailing_garbage", '{"a": 0} x'), ("nested", '{"a": {"b": 1}}'),
                       ("same_id", '{"a": 1, "b": 1}'), ("max_id", '{"a": %d}' % ((1 << 24) - 1)),
                       ("bad_escape", '{"\\x41": 1}'), ("short_unicode", '{"\\u12": 1}'),
                       ("whitespace", ' \t\r\n{ \n"a" \t: \r 0 \n} \n')]:
        put("vocab", name, text)
    put("vocab", "invalid_utf8", b'{"\xff": 1, "\xc0\xaf": 2}')
    put("vocab", "nul_byte", b'{"a\0": 1}')
    put("vocab", "bom", b'\xef\xbb\xbf{"a": 1}')


def wcache_file(entries, n_mats=None, magic=b"QTTSWCCH", layout=1, key=0x1234, size=None, crc=True):
    """A prepared-weights cache (src/model/weights_cache.h): entries are
    (kind, dtype, quant, rows, cols, bytes, scales offset, mins offset or None)."""
    n = len(entries) if n_mats is None else n_mats
    off = (64 + 56 * len(entries) + 4095) // 4096 * 4096
    table, blobs = b"", b""
    for kind, dt, q, rows, cols, nb, os_, om in entries:
        o = off if kind else 0
        table += struct.pack("<IIIiiIQQQQ", kind, dt, q, rows, cols, 0, o, nb if kind else 0, os_ if kind else 0,
                             0xFFFFFFFFFFFFFFFF if om is None else om)
        if kind:
            blobs += bytes((i * 37) & 255 for i in range(nb)) + b"\0" * ((nb + 4095) // 4096 * 4096 - nb)
            off += (nb + 4095) // 4096 * 4096
    body = table + b"\0" * ((64 + 56 * len(entries) + 4095) // 4096 * 4096 - 64 - len(table)) + blobs
    total = 64 + len(body) if size is None else size
    hdr = magic + struct.pack("<IIQQ", layout, n, key, total) + b"\0" * 28
    c = zlib.crc32(table, zlib.crc32(hdr)) & 0xFFFFFFFF
    return hdr + struct.pack("<I", c if crc else c ^ 1) + body


def wcache():
    I8, U8, F32 = 7, 8, 0
    def rup(x):
        return (x + 63) // 64 * 64
    # Q8_B32 3 x 40: kpad 128, data 3*128, scales 3*4*2
    q8 = (1, I8, 1, 3, 40, rup(384) + rup(24), rup(384), None)
    # Q4M_B32 2 x 130: kpad 256, data 2*128, scales 2*8*2, mins as many
    q4m = (1, U8, 3, 2, 130, rup(256) + 2 * rup(32), rup(256), rup(256) + rup(32))
    q4 = (1, U8, 2, 5, 128, rup(320) + rup(40), rup(320), None)
    # Q8_B32_X16 17 x 128: 2 groups * 4 blocks * 512, scales 2*4*32
    x16 = (1, I8, 4, 17, 128, 4096 + rup(256), 4096, None)
    x16m = (1, U8, 5, 16, 256, 2048 + 2 * rup(256), 2048, 2048 + rup(256))
    stored = (0, F32, 0, 4, 4, 0, 0, None)
    f32 = (2, F32, 0, 1, 6, 24, 0, None)
    put("wcache", "valid", b"\0" + wcache_file([q8, q4m, stored, f32]))
    put("wcache", "valid_x16", b"\0" + wcache_file([x16, x16m, q4]))
    put("wcache", "valid_repaired", b"\7" + wcache_file([q8, x16], crc=False, size=7))
    put("wcache", "empty_table", b"\0" + wcache_file([]))
    put("wcache", "bad_magic", b"\0" + wcache_file([q8], magic=b"QTTSWCCX"))
    put("wcache", "other_layout", b"\0" + wcache_file([q8], layout=2))
    put("wcache", "bad_crc", b"\0" + wcache_file([q8], crc=False))
    put("wcache", "size_mismatch", b"\0" + wcache_file([q8], size=100))
    put("wcache", "truncated", b"\0" + wcache_file([q8, q4m])[:100])
    put("wcache", "short_data", b"\6" + wcache_file([(1, I8, 1, 3, 40, 64, 0, None)]))
    put("wcache", "scales_past_entry", b"\6" + wcache_file([(1, I8, 1, 3, 40, rup(384) + 8, rup(384), None)]))
    put("wcache", "mins_missing", b"\6" + wcache_file([(1, U8, 3, 2, 130, rup(256) + 2 * rup(32), rup(256), None)]))
    put("wcache", "mins_on_q8", b"\6" + wcache_file([(1, I8, 1, 3, 40, rup(384) + 2 * rup(24), rup(384), rup(384) + 64)]))
    put("wcache", "dtype_mismatch", b"\6" + wcache_file([(1, U8, 1, 3, 40, rup(384) + rup(24), rup(384), None)]))
    put("wcache", "unknown_quant", b"\6" + wcache_file([(1, I8, 9, 3, 40, rup(384) + rup(24), rup(384), None)]))
    put("wcache", "float_kind1", b"\6" + wcache_file([(1, F32, 0, 3, 40, 480, 0, None)]))
    put("wcache", "negative_rows", b"\6" + wcache_file([(1, I8, 1, -3, 40, rup(384) + rup(24), rup(384), None)]))
    put("wcache", "huge_shape", b"\6" + wcache_file([(1, I8, 1, 1 << 30, 1 << 24, 4096, 64, None)]))
    put("wcache", "unknown_kind", b"\6" + wcache_file([(3, I8, 1, 3, 40, 512, 448, None)]))
    put("wcache", "f32_odd_bytes", b"\6" + wcache_file([(2, F32, 0, 1, 6, 23, 0, None)]))
    put("wcache", "many_mats", b"\7" + wcache_file([q8], n_mats=4096))


def tokfiles():
    d = "tests/golden/tiny_tokenizer"
    v, m, c = (open(os.path.join(d, f), "rb").read() for f in ("vocab.json", "merges.txt", "tokenizer_config.json"))
    M, C = b"\n==MERGES==\n", b"\n==CONFIG==\n"
    put("tokfiles", "tiny", b"\0" + v + M + m + C + c)
    put("tokfiles", "tiny_alt", b"\1" + v + M + m + C + c)
    put("tokfiles", "no_config", b"\0" + v + M + m)
    put("tokfiles", "crlf_merges", b"\0" + v + M + m.replace(b"\n", b"\r\n") + C + c)
    put("tokfiles", "merge_unknown_token", b"\0" + v + M + b"#version: 0.2\nzz qq\n" + C + c)
    put("tokfiles", "merge_three_parts", b"\0" + v + M + b"a s s\n" + C + c)
    put("tokfiles", "merge_one_part", b"\0" + v + M + b"as\n" + C + c)
    put("tokfiles", "merge_repeated", b"\0" + v + M + b"a s\na s\n" + C + c)
    put("tokfiles", "config_not_object", b"\0" + v + M + m + C + b"[1]")
    put("tokfiles", "config_bad_id", b"\0" + v + M + m + C + b'{"added_tokens_decoder": {"x": {"content": "<a>"}}}')
    put("tokfiles", "config_negative_id", b"\0" + v + M + m + C + b'{"added_tokens_decoder": {"-1": {"content": "<a>"}}}')
    put("tokfiles", "config_empty_content", b"\0" + v + M + m + C + b'{"added_tokens_decoder": {"5": {"content": ""}}}')
    put("tokfiles", "config_no_content", b"\0" + v + M + m + C + b'{"added_tokens_decoder": {"5": {"special": true}}}')
    put("tokfiles", "config_huge_id", b"\0" + v + M + m + C + b'{"added_tokens_decoder": {"99999999999": {"content": "<a>"}}}')
    put("tokfiles", "config_strip", b"\0" + v + M + m + C +
        b'{"added_tokens_decoder": {"1000": {"content": "<|im_start|>", "lstrip": true, "rstrip": true}, "1001": {"content": "<|im_end|>"}}}')
    put("tokfiles", "empty_vocab", b"\0{}" + M + b"" + C + c)
    put("tokfiles", "no_byte_tokens", b"\0" + b'{"a": 0, "b": 1, "ab": 2}' + M + b"a b\n")

TARGETS = [safetensors, config, tokenizer, split, voice, audio, codes, speech, http, ws, tokstream, vocab, wcache, tokfiles]

if __name__ == "__main__":
    # make_seeds.py [target...]: only those targets' seeds (default: all)
    import sys
    for f in TARGETS:
        if len(sys.argv) < 2 or f.__name__ in sys.argv[1:]:
            f()
