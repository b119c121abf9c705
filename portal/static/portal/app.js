// Forms marked data-busy disable their submit button on submit and show its data-busy-text, so a
// double click sends one request and the page says it is working.
document.addEventListener("submit", function (event) {
  var form = event.target;
  if (!form.hasAttribute || !form.hasAttribute("data-busy")) return;
  if (form.dataset.submitted === "1") { event.preventDefault(); return; }
  form.dataset.submitted = "1";
  form.querySelectorAll("button[type=submit]").forEach(function (button) {
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
    if (button.dataset.busyText) button.textContent = button.dataset.busyText;
  });
});

// A dialog swapped in by htmx (the license agreement) opens as a modal in the viewport, wherever the
// button that asked for it sits on the page; without showModal (old browsers) the CSS keeps it fixed in view.
document.addEventListener("htmx:afterSettle", function (event) {
  var root = event.detail && event.detail.target;
  if (!root || !root.querySelectorAll) return;
  root.querySelectorAll("dialog[data-modal]").forEach(function (dialog) {
    if (typeof dialog.showModal === "function" && !dialog.matches(":modal")) {
      if (dialog.open) dialog.close();
      dialog.showModal();
    }
  });
});

// The job launch form: switching the GPU type moves every field that still holds the old type's default
// to the new type's (a CPU slot trains short samples and checkpoints every minute, a GPU the usual shapes);
// a value the user typed stays. The defaults come from the page (json_script "launch-defaults"). The type
// the fields belong to is noted when the select gets focus (a browser may have restored another one than
// the page was rendered with, on Back or reload) and after each change.
document.addEventListener("focusin", function (event) {
  var select = event.target;
  if (select && select.id === "id_gpu_type" && select.form && document.getElementById("launch-defaults")) {
    select.form.dataset.gpuType = select.value;
  }
});
document.addEventListener("change", function (event) {
  var select = event.target;
  if (!select || select.id !== "id_gpu_type") return;
  var script = document.getElementById("launch-defaults");
  if (!script) return;
  var data = JSON.parse(script.textContent);
  var before = data.types[select.form.dataset.gpuType || data.current];
  var after = data.types[select.value];
  select.form.dataset.gpuType = select.value;
  if (!before || !after) return;
  Object.keys(after).forEach(function (name) {
    var input = select.form.elements[name];
    if (!input || input.value === "" || Number(input.value) !== Number(before[name])) return;
    input.value = String(after[name]);
  });
});
