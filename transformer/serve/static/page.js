// The page: translate the text box through /translate, list the sentences, draw a chosen one's attention.
"use strict";
const $ = (id) => document.getElementById(id);

async function post(path, body) {
  const response = await fetch(path, {method: "POST", headers: {"content-type": "application/json"},
                                      body: JSON.stringify(body)});
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function options() {
  return {beam_size: Number($("beam").value), n_best: Number($("nbest").value)};
}

async function translate() {
  $("status").textContent = "translating…";
  $("sentences").replaceChildren();
  try {
    const markup = $("markup").checked ? "xml" : "none";
    const data = await post("/translate", {text: $("source").value, markup, alignments: true, ...options()});
    const result = data.translations[0];
    $("output").textContent = result.text;
    result.sentences.forEach((sentence, i) => $("sentences").append(sentenceItem(sentence, i)));
    $("status").textContent = "";
    if (result.sentences.length) await showAttention(0);
  } catch (err) {
    $("status").textContent = err.message;
  }
}

function sentenceItem(sentence, i) {
  const item = document.createElement("li");
  item.dataset.source = sentence.source;
  item.textContent = `${sentence.source} → ${sentence.translation}`;
  item.title = `word alignment (source-target, from 0): ${sentence.alignment}`;
  for (const alternative of sentence.n_best.slice(1)) {
    const extra = document.createElement("div");
    extra.className = "nbest";
    extra.textContent = `${alternative.text} (${alternative.score.toFixed(3)})`;
    item.append(extra);
  }
  item.addEventListener("click", () => showAttention(i));
  return item;
}

async function showAttention(i) {
  const items = [...$("sentences").children];
  items.forEach((item, j) => item.classList.toggle("chosen", j === i));
  const data = await post("/attention", {text: items[i].dataset.source, ...options(), n_best: null});
  $("attention-title").textContent = `sentence ${i + 1}: mean over layers and heads`;
  draw(data.weights, data.source_tokens, data.target_tokens);
  $("heatmap").dataset.title = String(i + 1);
}

// White to dark blue as the weight goes from 0 to the matrix's largest (matplotlib's imshow scales the same way).
function colour(t) {
  const mix = (a, b) => Math.round(a + (b - a) * Math.min(1, Math.max(0, t)));
  return `rgb(${mix(255, 8)}, ${mix(255, 48)}, ${mix(255, 107)})`;
}

function draw(weights, sourceTokens, targetTokens) {
  const canvas = $("heatmap"), cell = 26, left = 110;
  const top = 20 + 6 * Math.max(...sourceTokens.map((t) => t.length));
  const vmax = Math.max(1e-6, ...weights.flat());
  canvas.width = left + cell * sourceTokens.length + 10;
  canvas.height = top + cell * targetTokens.length + 10;
  canvas.dataset.rows = targetTokens.length;
  canvas.dataset.columns = sourceTokens.length;
  const ctx = canvas.getContext("2d");
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.font = "12px sans-serif";
  ctx.fillStyle = "#222";
  sourceTokens.forEach((token, j) => {
    ctx.save();
    ctx.translate(left + cell * j + cell / 2, top - 6);
    ctx.rotate(-Math.PI / 3);
    ctx.fillText(token, 0, 0);
    ctx.restore();
  });
  targetTokens.forEach((token, i) => {
    ctx.fillStyle = "#222";
    ctx.textAlign = "right";
    ctx.fillText(token, left - 6, top + cell * i + cell / 2 + 4);
    ctx.textAlign = "left";
    weights[i].forEach((w, j) => {
      ctx.fillStyle = colour(w / vmax);
      ctx.fillRect(left + cell * j, top + cell * i, cell - 1, cell - 1);
    });
  });
}

// Type-ahead: the text translated as one sentence after what is typed, three alternatives for what comes next
// (greedy search, the first piece of each different); a click takes one. Only the newest answer is shown.
let typed = 0, waiting = null;

async function alternatives() {
  const mine = ++typed, prefix = $("prefix").value, text = $("source").value.trim();
  if (!prefix.trim() || !text) return $("alternatives").replaceChildren();
  try {
    const data = await post("/translate", {text, target_prefix: prefix, alternatives: 3, strategy: "greedy"});
    if (mine !== typed) return;
    const items = data.translations[0].sentences[0].n_best.map((alternative) => {
      const item = document.createElement("li");
      item.textContent = alternative.text;
      item.addEventListener("click", () => { $("prefix").value = alternative.text; $("output").textContent = alternative.text; });
      return item;
    });
    $("alternatives").replaceChildren(...items);
    $("alternatives").dataset.prefix = prefix;
  } catch (err) {
    if (mine === typed) $("status").textContent = err.message;
  }
}

$("prefix").addEventListener("input", () => { clearTimeout(waiting); waiting = setTimeout(alternatives, 250); });
$("translate").addEventListener("click", translate);
fetch("/info").then((r) => r.json()).then((info) => { $("model").textContent = info.model; });
