// The parts of three.js the HTML report's viewer uses (pcreg/viz/report_viewer.js), bundled
// into three-pcreg.min.js as the global PCREG_THREE; the build command is in README.md.
export {
  BufferGeometry,
  Color,
  Float32BufferAttribute,
  GridHelper,
  LineBasicMaterial,
  LineSegments,
  Matrix4,
  PerspectiveCamera,
  Points,
  PointsMaterial,
  Scene,
  Sphere,
  Vector3,
  WebGLRenderer,
} from "three";
export { OrbitControls } from "three/examples/jsm/controls/OrbitControls.js";
