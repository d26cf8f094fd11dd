// The 3-D view of pcreg's HTML report (pcreg/viz/report.py inlines this file after
// three.js, vendor/three-pcreg.min.js, which defines PCREG_THREE).
//
// It reads the JSON of <script id="pcreg-data">: layers of points or line segments (float32,
// base64, coordinates relative to the drawing's origin), the poses each layer belongs to
// ("after": the source moved by the estimate; "before": the input poses), the camera and a
// scale grid. It draws on demand (after a turn, a toggle or a resize), never in a loop, so an
// open report costs no CPU. When the first frame is drawn, <body data-drawn="1">; when WebGL
// is missing, data-drawn="no-webgl" and a note replaces the view.
(function () {
  "use strict";
  const THREE = window.PCREG_THREE;
  const data = JSON.parse(document.getElementById("pcreg-data").textContent);
  const holder = document.getElementById("pcreg-view");

  function floats(base64) {
    const text = atob(base64);
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    return new Float32Array(bytes.buffer);
  }

  let renderer;
  try {
    renderer = new THREE.WebGLRenderer({ antialias: false });
  } catch (err) {
    holder.classList.add("nogl");
    holder.textContent =
      "This browser could not start WebGL, so the 3-D view is not drawn. " +
      "The table below still gives the result.";
    document.body.dataset.drawn = "no-webgl";
    return;
  }
  renderer.setPixelRatio(window.devicePixelRatio || 1);
  renderer.setClearColor(0xffffff, 1);
  holder.appendChild(renderer.domElement);

  const scene = new THREE.Scene();
  const layers = data.layers.map(function (layer) {
    const geometry = new THREE.BufferGeometry();
    geometry.setAttribute("position", new THREE.Float32BufferAttribute(floats(layer.xyz), 3));
    const color = new THREE.Color(layer.color);
    const object =
      layer.kind === "lines"
        ? new THREE.LineSegments(geometry, new THREE.LineBasicMaterial({ color: color }))
        : new THREE.Points(
            geometry,
            new THREE.PointsMaterial({ color: color, size: data.point_size, sizeAttenuation: false })
          );
    scene.add(object);
    return { spec: layer, object: object, on: true };
  });

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

  // the camera: along data.view.front from the centre of everything drawn, data.view.up up
  const sphere = new THREE.Sphere();
  const bounds = [];
  layers.forEach(function (layer) {
    layer.object.geometry.computeBoundingSphere();
    if (layer.object.geometry.boundingSphere.radius > 0) bounds.push(layer.object.geometry.boundingSphere);
  });
  if (bounds.length) {
    sphere.copy(bounds[0]);
    bounds.slice(1).forEach(function (b) { sphere.union(b); });
  }
  const radius = Math.max(sphere.radius, 1e-6);
  const fov = 35; // vertical, degrees
  const camera = new THREE.PerspectiveCamera(fov, 1, radius / 1000, radius * 100);
  const front = new THREE.Vector3().fromArray(data.view.front).normalize();

  // the nearest distance along `front` from which every point drawn is in the picture
  function fitDistance() {
    const up = new THREE.Vector3().fromArray(data.view.up);
    const right = new THREE.Vector3().crossVectors(up, front).normalize();
    const top = new THREE.Vector3().crossVectors(front, right);
    const tanV = Math.tan(((fov / 2) * Math.PI) / 180);
    const tanH = tanV * camera.aspect;
    let distance = 0;
    layers.forEach(function (layer) {
      const xyz = layer.object.geometry.attributes.position.array;
      for (let i = 0; i < xyz.length; i += 3) {
        const x = xyz[i] - sphere.center.x, y = xyz[i + 1] - sphere.center.y;
        const z = xyz[i + 2] - sphere.center.z;
        const along = x * front.x + y * front.y + z * front.z;
        const across = Math.abs(x * right.x + y * right.y + z * right.z);
        const high = Math.abs(x * top.x + y * top.y + z * top.z);
        distance = Math.max(distance, along + across / tanH, along + high / tanV);
      }
    });
    return Math.max(1.05 * distance, radius / 100);
  }

  const controls = new THREE.OrbitControls(camera, renderer.domElement);
  function resetView() {
    camera.up.fromArray(data.view.up);
    camera.position.copy(sphere.center).addScaledVector(front, fitDistance());
    controls.target.copy(sphere.center);
    controls.update();
  }
  // OrbitControls turns about camera.up as it is when they are made: set it first
  camera.up.fromArray(data.view.up);

  let state = data.states[0];
  function draw() {
    layers.forEach(function (layer) {
      layer.object.visible = layer.on && layer.spec.states.indexOf(state) >= 0;
    });
    renderer.render(scene, camera);
  }
  function resize() {
    const width = Math.max(holder.clientWidth, 100);
    const height = Math.max(holder.clientHeight, 100);
    renderer.setSize(width, height);
    camera.aspect = width / height;
    camera.updateProjectionMatrix();
    draw();
  }
  controls.addEventListener("change", draw);
  window.addEventListener("resize", resize);

  // the legend: one row per layer of the current poses, its checkbox shows or hides it
  const legend = document.getElementById("pcreg-legend");
  function fillLegend() {
    legend.textContent = "";
    layers.forEach(function (layer) {
      if (layer.spec.states.indexOf(state) < 0) return;
      const row = document.createElement("label");
      const box = document.createElement("input");
      box.type = "checkbox";
      box.checked = layer.on;
      box.addEventListener("change", function () { layer.on = box.checked; draw(); });
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

  // the toolbar: the poses (when there is a transform), the point size, the view reset
  const buttons = document.querySelectorAll("#pcreg-tools button[data-state]");
  buttons.forEach(function (button) {
    button.addEventListener("click", function () {
      state = button.dataset.state;
      buttons.forEach(function (b) { b.classList.toggle("active", b === button); });
      fillLegend();
      draw();
    });
  });
  const size = document.getElementById("pcreg-size");
  size.value = data.point_size;
  size.addEventListener("input", function () {
    layers.forEach(function (layer) {
      if (layer.spec.kind === "points") layer.object.material.size = Number(size.value);
    });
    draw();
  });
  document.getElementById("pcreg-reset").addEventListener("click", function () {
    resetView();
    draw();
  });

  fillLegend();
  resize();
  resetView();
  draw();
  document.body.dataset.drawn = "1";
})();
