// The per-query inspector: drag a document of the top 100 to another rank (or move it with
// its ↑ / ↓ buttons) and every number recomputes for the new order, as the measures'
// definitions (evaluation/measures.py) state them: the browser's copy, needed to recompute
// without a request. The browser test holds it to the server's numbers for the same order
// (measures.evaluate, through evaluation/inspect.py's order_values), and on load the page
// checks that this script agrees with the server.
(function () {
  "use strict";
  const source = document.getElementById("inspector-data");
  const tbody = document.getElementById("ranking-rows");
  if (!source || !tbody) return;
  const data = JSON.parse(source.textContent);
  const K = data.k;
  const DEPTH = data.depth;

  // ---------------------------------------------------------------- the maths (inspect.py)
  function gain(grade) {
    if (grade === null || grade <= 0) return 0;
    return data.gain === "exponential" ? Math.pow(2, grade) - 1 : grade;
  }

  function dcg(grades, k) {
    let sum = 0;
    for (let r = 1; r <= Math.min(k, grades.length); r++) sum += gain(grades[r - 1]) / Math.log2(r + 1);
    return sum;
  }

  const idcg = dcg(data.judged.slice().sort(function (a, b) { return b - a; }), K);
  const nRel = data.judged.filter(function (g) { return g >= data.threshold; }).length;

  // `top`: the grades of the top 100 in rank order (null: unjudged); the judged documents
  // below it keep their ranks (`data.below`, [rank, grade] pairs in rank order).
  function orderValues(top) {
    const ranked = top.map(function (g, i) { return [i + 1, g]; }).concat(data.below);
    let found = 0, first = 0, precisionSum = 0;
    ranked.forEach(function (pair) {
      const rank = pair[0], grade = pair[1];
      if (grade !== null && grade >= data.threshold) {
        found += 1;
        first = first || rank;
        precisionSum += found / rank;
      }
    });
    const window = Math.min(K, data.retrieved);
    const judgedTop = top.slice(0, K).filter(function (g) { return g !== null; }).length;
    const inDepth = top.slice(0, DEPTH).filter(function (g) { return g !== null && g >= data.threshold; }).length;
    const dcgK = dcg(top, K);
    const values = {};
    values["ndcg@" + K] = idcg > 0 ? dcgK / idcg : 0;
    values["recall@" + DEPTH] = nRel ? inDepth / nRel : 0;
    values.mrr = first ? 1 / first : 0;
    values.map = nRel ? precisionSum / nRel : 0;
    values["judged@" + K] = window ? judgedTop / window : 0;
    values["dcg@" + K] = dcgK;
    return values;
  }

  // ---------------------------------------------------------------- the page
  const rows = function () { return Array.from(tbody.querySelectorAll("tr[data-docid]")); };
  const gradeOf = function (row) { return row.dataset.grade === "" ? null : Number(row.dataset.grade); };
  const fixed = function (x) { return x.toFixed(4); };
  const original = orderValues(rows().map(gradeOf));
  const status = document.getElementById("inspector-status");
  const reset = document.getElementById("inspector-reset");

  function agreesWithServer() {
    return data.measures.every(function (name) {
      return Math.abs(original[name] - data.values[name]) <= 1e-9;
    });
  }

  function cell(row, name) { return row.querySelector("td." + name); }

  function render() {
    const list = rows();
    let cumulative = 0;
    list.forEach(function (row, i) {
      const rank = i + 1;
      const contribution = gain(gradeOf(row)) / Math.log2(rank + 1);
      cumulative += contribution;
      cell(row, "rank").textContent = String(rank);
      setCell(row, "discount", fixed(1 / Math.log2(rank + 1)));
      setCell(row, "contribution", fixed(contribution));
      setCell(row, "cumulative", fixed(cumulative));
      row.classList.toggle("moved", String(rank) !== row.dataset.start);
      row.classList.toggle("cut", rank === K);
      row.querySelector(".move-up").disabled = i === 0;
      row.querySelector(".move-down").disabled = i === list.length - 1;
    });
    renderBelow(cumulative);
    const values = orderValues(list.map(gradeOf));
    document.querySelectorAll("output[data-measure]").forEach(function (output) {
      showValue(output, values[output.dataset.measure], original[output.dataset.measure]);
    });
    reset.disabled = !list.some(function (row) { return row.classList.contains("moved"); });
    return values;
  }

  function setCell(row, name, text) {
    const td = cell(row, name);
    if (td.dataset.first === undefined) td.dataset.first = text; // the first render: the run's order
    td.textContent = text;
    td.classList.toggle("changed", text !== td.dataset.first);
  }

  // The judged rows below the top 100 keep their ranks; their cumulative DCG follows the
  // top 100's, whose sum the order changes.
  function renderBelow(cumulative) {
    document.querySelectorAll("#below-rows tr[data-rank]").forEach(function (row) {
      const rank = Number(row.dataset.rank);
      const grade = Number(cell(row, "grade").textContent);
      cumulative += gain(grade) / Math.log2(rank + 1);
      cell(row, "cumulative").textContent = fixed(cumulative);
    });
  }

  function showValue(output, value, was) {
    output.dataset.value = String(value);
    output.textContent = fixed(value);
    const changed = Math.abs(value - was) > 1e-12;
    output.classList.toggle("changed", changed);
    const note = document.querySelector('[data-was="' + output.dataset.measure + '"]');
    if (!note) return;
    note.hidden = !changed;
    const delta = value - was;
    note.textContent = changed ? "was " + fixed(was) + " (" + (delta > 0 ? "+" : "") + fixed(delta) + ")" : "";
  }

  function moveTo(row, index) {
    const list = rows();
    const from = list.indexOf(row);
    if (from < 0 || index < 0 || index >= list.length || index === from) return;
    list.splice(from, 1);
    list.splice(index, 0, row);
    list.forEach(function (r) { tbody.appendChild(r); });
    list.forEach(function (r) { r.classList.remove("just-moved"); });
    row.classList.add("just-moved");
    const values = render();
    announce(row.dataset.docid + " moved to rank " + (index + 1) + ": nDCG@" + K + " " + fixed(values["ndcg@" + K]));
  }

  function reorder(compare, message) {
    rows().sort(compare).forEach(function (r) { tbody.appendChild(r); r.classList.remove("just-moved"); });
    render();
    announce(message);
  }

  function announce(message) {
    status.textContent = message;
    document.body.dataset.inspectorMoves = String(Number(document.body.dataset.inspectorMoves || 0) + 1);
  }

  // ---------------------------------------------------------------- keyboard: ↑ / ↓ buttons
  tbody.addEventListener("click", function (event) {
    const button = event.target.closest("button");
    if (!button) return;
    const row = button.closest("tr");
    const up = button.classList.contains("move-up");
    moveTo(row, rows().indexOf(row) + (up ? -1 : 1));
    const again = row.querySelector(up ? ".move-up" : ".move-down");
    (again.disabled ? row.querySelector(up ? ".move-down" : ".move-up") : again).focus();
  });

  // ---------------------------------------------------------------- mouse: drag and drop
  let dragged = null;
  tbody.addEventListener("dragstart", function (event) {
    dragged = event.target.closest("tr[data-docid]");
    if (!dragged) return;
    dragged.classList.add("dragging");
    event.dataTransfer.effectAllowed = "move";
    event.dataTransfer.setData("text/plain", dragged.dataset.docid);
  });
  tbody.addEventListener("dragover", function (event) {
    const target = event.target.closest("tr[data-docid]");
    if (!dragged || !target) return;
    event.preventDefault();
    rows().forEach(function (r) { r.classList.toggle("drop-target", r === target && r !== dragged); });
  });
  tbody.addEventListener("drop", function (event) {
    const target = event.target.closest("tr[data-docid]");
    if (!dragged || !target) return;
    event.preventDefault();
    moveTo(dragged, rows().indexOf(target)); // the dragged document takes the target's rank
  });
  tbody.addEventListener("dragend", function () {
    rows().forEach(function (r) { r.classList.remove("dragging", "drop-target"); });
    dragged = null;
  });

  reset.addEventListener("click", function () {
    reorder(function (a, b) { return Number(a.dataset.start) - Number(b.dataset.start); }, "The run's order again.");
  });
  document.getElementById("inspector-ideal").addEventListener("click", function () {
    reorder(function (a, b) {
      const ga = gradeOf(a) === null ? -1 : gradeOf(a), gb = gradeOf(b) === null ? -1 : gradeOf(b);
      return gb - ga || Number(a.dataset.start) - Number(b.dataset.start);
    }, "The top " + DEPTH + " in their ideal order.");
  });

  document.getElementById("inspector-mismatch").hidden = agreesWithServer();
  render();
  document.body.dataset.inspectorReady = "1";
})();
