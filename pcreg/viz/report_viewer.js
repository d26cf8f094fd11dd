// The 3-D view of pcreg's HTML report (pcreg/viz/report.py inlines this file after
// three.js, vendor/three-pcreg.min.js, which defines PCREG_THREE).
//
// It reads the JSON of <script id="pcreg-data">: layers of points or line segments (float32,
// base64, coordinates relative to the drawing's origin), the poses each layer belongs to
// ("after": the source moved by the estimate; "before": the input poses; "given": a report
// without a transform), the legend group each belongs to, the camera direction and a scale
// grid. It draws on demand (after a turn, a toggle or a resize), never in a loop, so an open
// report costs no CPU. The page's <body data-drawn> says how it went: "1" once the first frame
// is drawn, "no-webgl" when the browser has no WebGL, "error" when drawing failed (the note
// replacing the view says why), "lost" when the browser took the WebGL context away.
(function () {
  "use strict";
  const holder = document.getElementById("pcreg-view");

  function fail(state, message) {
    holder.classList.add("nogl");
    holder.textContent = message + " The table below still gives the result.";
    document.body.dataset.drawn = state;
  }

  function floats(base64) {
    const text = atob(base64);
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    return new Float32Array(bytes.buffer);
  }

  let renderer;
  try {
    renderer = new window.PCREG_THREE.WebGLRenderer({ antialias: false });
  } catch (err) {
    fail("no-webgl", "This browser could not start WebGL, so the 3-D view is not drawn.");
    return;
  }
  try {
    start(window.PCREG_THREE, JSON.parse(document.getElementById("pcreg-data").textContent));
  } catch (err) {
    console.error(err);
    fail("error", "The 3-D view could not be drawn (" + err.message + ").");
  }

  function start(THREE, data) {
    renderer.setClearColor(0xffffff, 1);
    holder.appendChild(renderer.domElement);
    renderer.domElement.addEventListener("webglcontextlost", function (event) {
      event.preventDefault();
      fail("lost", "The browser took the WebGL context away; reload the page to draw again.");
    });

    const scene = new THREE.Scene();
    const groupOn = {};
    const layers = data.layers.map(function (spec) {
      const geometry = new THREE.BufferGeometry();
      geometry.setAttribute("position", new THREE.Float32BufferAttribute(floats(spec.xyz), 3));
      const color = new THREE.Color(spec.color);
      const object =
        spec.kind === "lines"
          ? new THREE.LineSegments(geometry, new THREE.LineBasicMaterial({ color: color }))
          : new THREE.Points(
              geometry,
              new THREE.PointsMaterial({ color: color, size: data.point_size, sizeAttenuation: false })
            );
      scene.add(object);
      groupOn[spec.group] = true;
      return { spec: spec, object: object };
    });
    function inState(layer, state) {
      return layer.spec.states.indexOf(state) >= 0;
    }

    const grid = data.grid;
    if (grid) {
      const helper = new THREE.GridHelper(grid.size, grid.cells, 0xbbbbbb, 0xdddddd);
      // GridHelper lies in its local x-z plane: x along u, y (its normal) along n, z along v
      const u = new THREE.Vector3().fromArray(grid.u);
      const n = new THREE.Vector3().fromArray(grid.n);
      const v = new THREE.Vector3().fromArray(grid.v);
      helper.applyMatrix4(new THREE.Matrix4().makeBasis(u, n, v));
      helper.position.fromArray(grid.centre);
      scene.add(helper);
    }

    // The camera looks along -front with `up` up; it is fitted to the layers of one state so
    // that a source given kilometres away does not shrink the aligned view to a dot.
    const fov = 35; // vertical, degrees
    const camera = new THREE.PerspectiveCamera(fov, 1, 0.001, 1000);
    const front = new THREE.Vector3().fromArray(data.view.front).normalize();
    const up = new THREE.Vector3().fromArray(data.view.up);
    const right = new THREE.Vector3().crossVectors(up, front).normalize();
    const top = new THREE.Vector3().crossVectors(front, right);
    camera.up.copy(up); // OrbitControls turn about camera.up as it is when they are made
    const controls = new THREE.OrbitControls(camera, renderer.domElement);

    function each(state, visit) {
      layers.forEach(function (layer) {
        if (!inState(layer, state)) return;
        const xyz = layer.object.geometry.attributes.position.array;
        for (let i = 0; i < xyz.length; i += 3) visit(xyz[i], xyz[i + 1], xyz[i + 2]);
      });
    }
    // the centre of a state's bounding box and its half diagonal (at least 1 mm)
    function bounds(state) {
      const low = [Infinity, Infinity, Infinity];
      const high = [-Infinity, -Infinity, -Infinity];
      each(state, function (x, y, z) {
        low[0] = Math.min(low[0], x); low[1] = Math.min(low[1], y); low[2] = Math.min(low[2], z);
        high[0] = Math.max(high[0], x); high[1] = Math.max(high[1], y); high[2] = Math.max(high[2], z);
      });
      if (!(low[0] <= high[0])) return { centre: new THREE.Vector3(), radius: 1 };
      const centre = new THREE.Vector3((low[0] + high[0]) / 2, (low[1] + high[1]) / 2, (low[2] + high[2]) / 2);
      const diagonal = Math.hypot(high[0] - low[0], high[1] - low[1], high[2] - low[2]);
      return { centre: centre, radius: Math.max(diagonal / 2, 1e-3) };
    }
    let fitted = null;
    // place the camera along `front` at the nearest distance that shows every point of `state`
    function fit(state) {
      const b = bounds(state);
      const tanV = Math.tan(((fov / 2) * Math.PI) / 180);
      const tanH = tanV * camera.aspect;
      let distance = b.radius; // what an empty or one-point state keeps
      each(state, function (x, y, z) {
        x -= b.centre.x; y -= b.centre.y; z -= b.centre.z;
        const along = x * front.x + y * front.y + z * front.z;
        const across = Math.abs(x * right.x + y * right.y + z * right.z);
        const high = Math.abs(x * top.x + y * top.y + z * top.z);
        distance = Math.max(distance, along + across / tanH, along + high / tanV);
      });
      distance *= 1.05;
      camera.up.copy(up);
      camera.near = distance / 1000;
      camera.far = distance * 50 + 2 * b.radius;
      camera.updateProjectionMatrix();
      camera.position.copy(b.centre).addScaledVector(front, distance);
      controls.target.copy(b.centre);
      controls.maxDistance = distance * 20;
      controls.update();
      fitted = b;
    }

    let state = data.states[0];
    let ready = false; // one render at start, after the camera is fitted
    function draw() {
      if (!ready) return;
      layers.forEach(function (layer) {
        layer.object.visible = groupOn[layer.spec.group] && inState(layer, state);
      });
      renderer.render(scene, camera);
    }
    function size() {
      const width = Math.max(holder.clientWidth, 100);
      const height = Math.max(holder.clientHeight, 100);
      renderer.setPixelRatio(window.devicePixelRatio || 1); // it changes with the browser's zoom
      renderer.setSize(width, height);
      camera.aspect = width / height;
      camera.updateProjectionMatrix();
    }
    controls.addEventListener("change", draw);
    window.addEventListener("resize", function () {
      size();
      draw();
    });

    // the legend: a row per group shown in this state; its box shows or hides the group in
    // every state (the source as given and as moved together)
    const legend = document.getElementById("pcreg-legend");
    function fillLegend() {
      legend.textContent = "";
      layers.forEach(function (layer) {
        if (!inState(layer, state)) return;
        const group = layer.spec.group;
        const row = document.createElement("label");
        const box = document.createElement("input");
        box.type = "checkbox";
        box.checked = groupOn[group];
        box.dataset.group = group;
        box.addEventListener("change", function () {
          groupOn[group] = box.checked;
          draw();
        });
        const swatch = document.createElement("span");
        swatch.className = layer.spec.kind === "lines" ? "swatch line" : "swatch";
        swatch.style.background = layer.spec.color;
        row.append(box, swatch, document.createTextNode(layer.spec.name));
        legend.appendChild(row);
      });
      if (grid) {
        const row = document.createElement("div");
        row.className = "gridnote";
        row.textContent = "grid: " + grid.label + " cells";
        legend.appendChild(row);
      }
    }

    // the toolbar: the poses (when there is a transform), the point size, the view reset.
    // Switching poses keeps the camera unless the other poses' points lie elsewhere or at
    // another scale (a source given far away): then the camera is fitted to them.
    const buttons = document.querySelectorAll("#pcreg-tools button[data-state]");
    buttons.forEach(function (button) {
      button.addEventListener("click", function () {
        state = button.dataset.state;
        buttons.forEach(function (b) {
          b.classList.toggle("active", b === button);
        });
        const b = bounds(state);
        const moved = b.centre.distanceTo(fitted.centre) > fitted.radius;
        if (moved || b.radius > 3 * fitted.radius || 3 * b.radius < fitted.radius) fit(state);
        fillLegend();
        draw();
      });
    });
    const slider = document.getElementById("pcreg-size");
    slider.value = data.point_size;
    slider.addEventListener("input", function () {
      layers.forEach(function (layer) {
        if (layer.spec.kind === "points") layer.object.material.size = Number(slider.value);
      });
      draw();
    });
    document.getElementById("pcreg-reset").addEventListener("click", function () {
      fit(state);
      draw();
    });

    fillLegend();
    size();
    fit(state);
    ready = true;
    draw();
    document.body.dataset.drawn = "1";
  }
})();
