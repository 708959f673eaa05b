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


def voice_bytes(icl, X=8, Q=4, F=2, ids=(5, 6, 7), text=b"hello", flags=None, version=1, size=b"0b6"):
    b = b"QTTSVOIC" + struct.pack("<II", version, (1 if icl else 0) if flags is None else flags)
    b += b"base".ljust(16, b"\0") + size.ljust(16, b"\0")
    b += struct.pack("<IIII", X, Q, 2048, X) + struct.pack("<%df" % X, *[0.1 * i for i in range(X)])
    if icl:
        b += struct.pack("<I", F) + struct.pack("<%di" % (F * Q), *[(i * 7) % 2048 for i in range(F * Q)])
        b += struct.pack("<I", len(ids)) + struct.pack("<%di" % len(ids), *ids)
    else:
        b += struct.pack("<I", 0) + struct.pack("<I", 0)
    b += struct.pack("<I", len(text)) + text
    return crc_file(b)


def voice():
    put("voice", "xvector", voice_bytes(False, text=b""))
    put("voice", "icl", voice_bytes(True))
    put("voice", "icl_utf8", voice_bytes(True, text="参考文本".encode()))
    put("voice", "bad_crc", voice_bytes(True)[:-1] + b"\0")
    put("voice", "newer", voice_bytes(False, version=2))
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


if __name__ == "__main__":
    for f in [safetensors, config, tokenizer, split, voice, audio, codes, speech, http]:
        f()
