// The ws npm client against qtts-server's WebSocket of incremental text
// (QTTS_URL, QTTS_KEY; the server runs with --timeout 3): text sent in
// random pieces with pauses gives the same PCM bytes as POST
// /v1/audio/speech with the whole text (same seed, streaming text mode);
// sentences get audio.start / audio.done and the utterance session.done;
// a second utterance on the same connection; stream_audio false; ping/pong;
// errors as events (input before config, an unknown voice); close codes for
// a binary message (1003), an oversized message (1009), a client that never
// ends its text (1008 after the idle timeout) and session.close (1000).
// Prints "ok NAME" / "FAIL NAME: why" lines; tests/server/test_ws_node.sh runs it.
import WebSocket from 'ws';

const url = process.env.QTTS_URL;
const key = process.env.QTTS_KEY;
const wsUrl = url.replace(/^http/, 'ws') + '/v1/audio/speech/stream';
let failed = 0;
function check(name, cond, why) {
  if (cond) console.log(`ok ${name}`);
  else {
    failed++;
    console.log(`FAIL ${name}: ${why}`);
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let seed = 12345;
function rnd(n) { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; }

const config = { voice: 'vivian', language: 'english', seed: 7, text_mode: 'streaming', max_new_tokens: 60 };

async function httpPcm(input) {
  const r = await fetch(`${url}/v1/audio/speech`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: 'qtts', input, response_format: 'pcm', ...config }),
  });
  return Buffer.from(await r.arrayBuffer());
}

// One session: open, run fn(ws, events) that sends; resolve with what came back.
function session(fn, opts = {}) {
  return new Promise((resolve) => {
    const ws = new WebSocket(wsUrl, { headers: { Authorization: `Bearer ${key}` }, maxPayload: 1 << 26 });
    const out = { events: [], audio: [], binaries: 0, pongs: 0, close: null, reason: '', error: null };
    ws.on('message', (data, isBinary) => {
      if (isBinary) {
        out.audio.push(Buffer.from(data));
        out.binaries++;
      } else {
        const ev = JSON.parse(data.toString());
        out.events.push(ev);
        if (opts.onEvent) opts.onEvent(ws, ev, out);
      }
    });
    ws.on('pong', () => out.pongs++);
    ws.on('error', (e) => { out.error = e.message; });
    ws.on('close', (code, reason) => {
      out.close = code;
      out.reason = reason.toString();
      out.pcm = Buffer.concat(out.audio);
      resolve(out);
    });
    ws.on('open', () => fn(ws, out));
  });
}

async function sendPieces(ws, text) {
  const cps = Array.from(text);
  for (let i = 0; i < cps.length;) {
    const k = 1 + rnd(6);
    ws.send(JSON.stringify({ type: 'input.text', text: cps.slice(i, i + k).join('') }));
    i += k;
    await sleep(rnd(40));
  }
}

async function main() {
  const one = 'Streaming text arrives a few tokens at a time and speech starts before it ends';
  const ref = await httpPcm(one);
  // random pieces, then a second utterance on the same connection, then close
  const two = 'A second sentence follows. And a third one ends it';
  const s = await session(async (ws, out) => {
    ws.send(JSON.stringify({ type: 'session.config', ...config }));
    await sendPieces(ws, one);
    ws.send(JSON.stringify({ type: 'input.done' }));
    while (!out.events.some((e) => e.type === 'session.done')) await sleep(20);
    out.first = Buffer.concat(out.audio);
    out.audio = [];
    await sendPieces(ws, two);
    ws.send(JSON.stringify({ type: 'input.done' }));
    ws.send(JSON.stringify({ type: 'session.close' }));
  });
  check('ws_node/pieces_identical_to_whole_text', ref.length > 0 && s.first && s.first.equals(ref),
        `${s.first ? s.first.length : 0} bytes over the WebSocket vs ${ref.length} from POST /v1/audio/speech; ` +
        `close ${s.close}, events ${JSON.stringify(s.events).slice(0, 300)}`);
  const dones = s.events.filter((e) => e.type === 'session.done');
  const starts = s.events.filter((e) => e.type === 'audio.start' && e.utterance_index === 1);
  const adone = s.events.filter((e) => e.type === 'audio.done' && e.utterance_index === 1);
  check('ws_node/sentences_and_utterances', dones.length === 2 && dones[1].total_sentences === 2 &&
        starts.length === 2 && adone.length === 2 && starts[0].sample_rate === 24000 && starts[0].format === 'pcm' &&
        adone[0].total_bytes + adone[1].total_bytes === s.pcm.length && s.pcm.length > 0,
        JSON.stringify(s.events).slice(0, 600));
  const ref2 = await httpPcm('A second sentence follows.');
  check('ws_node/second_utterance_first_sentence', s.pcm.length >= ref2.length && s.pcm.subarray(0, ref2.length).equals(ref2),
        `${s.pcm.length} bytes, first sentence alone ${ref2.length}`);
  check('ws_node/session_close_1000', s.close === 1000, `close ${s.close} ${s.reason}`);

  // stream_audio false: one binary frame per sentence; ping/pong
  const nb = await session(async (ws, out) => {
    ws.ping();
    ws.send(JSON.stringify({ type: 'session.config', ...config, stream_audio: false }));
    ws.send(JSON.stringify({ type: 'input.text', text: two }));
    ws.send(JSON.stringify({ type: 'session.close' }));
  });
  check('ws_node/stream_audio_false', nb.binaries === 2 && nb.close === 1000,
        `${nb.binaries} binary frames, close ${nb.close}`);
  check('ws_node/ping_pong', nb.pongs === 1, `${nb.pongs} pongs`);

  // errors as events
  const er = await session(async (ws, out) => {
    ws.send(JSON.stringify({ type: 'input.text', text: 'too early' }));
    ws.send(JSON.stringify({ type: 'session.config', ...config, voice: 'nobody' }));
    ws.send('not json');
    ws.send(JSON.stringify({ type: 'session.close' }));
  });
  const msgs = er.events.filter((e) => e.type === 'error').map((e) => e.message);
  check('ws_node/errors_are_events', msgs.length === 3 && /session.config first/.test(msgs[0]) &&
        /nobody/.test(msgs[1]) && er.close === 1000, JSON.stringify(msgs));

  // close codes
  const bin = await session((ws) => ws.send(Buffer.from([1, 2, 3])));
  check('ws_node/binary_message_1003', bin.close === 1003, `close ${bin.close} ${bin.reason}`);
  const big = await session((ws) => ws.send(JSON.stringify({ type: 'input.text', text: 'x'.repeat(2 << 20) })));
  check('ws_node/oversized_message_1009', big.close === 1009, `close ${big.close} ${big.reason}`);
  const t0 = Date.now();
  const idle = await session((ws) => {
    ws.send(JSON.stringify({ type: 'session.config', ...config }));
    ws.send(JSON.stringify({ type: 'input.text', text: 'A client that never ends its' }));
  });
  check('ws_node/never_ending_client_1008', idle.close === 1008 && Date.now() - t0 < 20000 &&
        idle.events.some((e) => e.type === 'error' && /no message/.test(e.message)),
        `close ${idle.close} after ${Date.now() - t0} ms`);
  if (failed) process.exitCode = 1;
}

main().catch((e) => {
  console.log(`FAIL ws_node: ${e.stack || e}`);
  process.exitCode = 1;
});
