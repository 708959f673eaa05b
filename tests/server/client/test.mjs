// The official openai npm client against a running qtts-server
// (QTTS_URL, QTTS_KEY): a whole response, a streamed one, server-sent
// events, the model list, and errors mapped to the SDK's error classes.
// Prints "ok NAME" / "FAIL NAME: why" lines; tests/server/test_openai_node.sh runs it.
import OpenAI from 'openai';

const url = process.env.QTTS_URL;
const key = process.env.QTTS_KEY;
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0, timeout: 120000 });
let failed = 0;
function check(name, cond, why) {
  if (cond) console.log(`ok ${name}`);
  else {
    failed++;
    console.log(`FAIL ${name}: ${why}`);
  }
}

// force_frames (a qtts extension, passed through by the SDK): 60 frames = 230 KB of pcm, several
// times a stream read's 64 KiB, so the streamed response arrives in pieces however fast the server is
const base = { model: 'qtts', voice: 'vivian', input: 'Hello from the official client. How are you today?', seed: 21,
  force_frames: 60 };

async function bytes(resp) {
  return Buffer.from(await resp.arrayBuffer());
}

async function main() {
  // whole file
  const wav = await bytes(await client.audio.speech.create({ ...base, response_format: 'wav' }));
  const dataLen = wav.length >= 44 ? wav.readUInt32LE(40) : -1;
  check('openai_node/whole_wav', wav.length > 44 && wav.toString('ascii', 0, 4) === 'RIFF' &&
        wav.toString('ascii', 8, 12) === 'WAVE' && wav.readUInt32LE(24) === 24000 && dataLen === wav.length - 44,
        `${wav.length} bytes, data size ${dataLen}`);
  const pcm = await bytes(await client.audio.speech.create({ ...base, response_format: 'pcm' }));
  check('openai_node/whole_pcm_matches_wav', pcm.length > 0 && pcm.equals(wav.subarray(44)),
        `${pcm.length} pcm bytes vs ${wav.length - 44} in the wav`);
  const mp3 = await bytes(await client.audio.speech.create({ model: 'tts-1', voice: 'ryan', input: 'Default format.' }));
  check('openai_node/default_mp3', mp3.length > 4 && mp3[0] === 0xff && (mp3[1] & 0xe0) === 0xe0, `${mp3.length} bytes`);

  // streamed raw audio, read chunk by chunk as it comes
  const resp = await client.audio.speech.create({ ...base, response_format: 'pcm', stream_format: 'audio' });
  const chunks = [];
  for await (const c of resp.body) chunks.push(Buffer.from(c));
  const streamed = Buffer.concat(chunks);
  check('openai_node/streamed_chunks', chunks.length >= 2, `${chunks.length} chunk(s)`);
  check('openai_node/streamed_equals_whole', streamed.equals(pcm), `${streamed.length} bytes vs ${pcm.length}`);

  // server-sent events
  const sse = await client.audio.speech.create({ ...base, response_format: 'pcm', stream_format: 'sse' });
  const text = Buffer.from(await sse.arrayBuffer()).toString('utf8');
  const events = text.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => JSON.parse(e.slice(6)));
  const deltas = events.filter((e) => e.type === 'speech.audio.delta');
  const done = events.filter((e) => e.type === 'speech.audio.done');
  const audio = Buffer.concat(deltas.map((e) => Buffer.from(e.audio, 'base64')));
  check('openai_node/sse_events', deltas.length >= 2 && done.length === 1 && done[0].usage &&
        done[0].usage.output_tokens === pcm.length / 3840, `${deltas.length} deltas, ${done.length} done`);
  check('openai_node/sse_audio_equals_whole', audio.equals(pcm), `${audio.length} bytes vs ${pcm.length}`);

  // models
  const models = [];
  for await (const m of client.models.list()) models.push(m.id);
  check('openai_node/models_list', models.length === 1, JSON.stringify(models));

  // errors become the SDK's error classes
  try {
    await client.audio.speech.create({ ...base, voice: 'alloy' });
    check('openai_node/unknown_voice_400', false, 'no error');
  } catch (e) {
    check('openai_node/unknown_voice_400', e instanceof OpenAI.BadRequestError && e.status === 400 &&
          /Unknown voice/.test(e.message) && e.param === 'voice', `${e.constructor.name} ${e.status} ${e.message}`);
  }
  try {
    const bad = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await bad.audio.speech.create(base);
    check('openai_node/wrong_key_401', false, 'no error');
  } catch (e) {
    check('openai_node/wrong_key_401', e instanceof OpenAI.AuthenticationError && e.status === 401,
          `${e.constructor.name} ${e.status}`);
  }
}

main().then(() => process.exit(failed ? 1 : 0), (e) => {
  console.log(`FAIL openai_node/run: ${e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e}`);
  process.exit(1);
});
