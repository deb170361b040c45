#!/usr/bin/env python3
"""yocto-check-layer's checks that need no network and no world build, on one layer.

    check-layer-offline.py OE_CORE_DIR LAYER_DIR

Run inside an initialised build folder (oe-init-build-env) whose bblayers.conf already holds
the layer. yocto-check-layer itself first computes the signatures of a whole world build
without the layer (many minutes); these checks do not need them, so this runs oe-core's own
test cases (scripts/lib/checklayer/cases) through its own test context, selected by name.
"""
import logging
import os
import sys

# The cheap, offline ones: files, parse, environment, compat, patches.
TESTS = [
    "common.CommonCheckLayer.test_readme",
    "common.CommonCheckLayer.test_security",
    "common.CommonCheckLayer.test_parse",
    "common.CommonCheckLayer.test_show_environment",
    "common.CommonCheckLayer.test_layerseries_compat",
    "common.CommonCheckLayer.test_patches_upstream_status",
]


def main():
    oe, layer_dir = sys.argv[1], os.path.abspath(sys.argv[2])
    scripts = os.path.join(oe, "scripts")
    sys.path[0:0] = [os.path.join(scripts, "lib"), os.path.join(oe, "meta", "lib")]
    import scriptpath  # noqa: E402 (oe-core's, found through the path above)

    scriptpath.add_bitbake_lib_path()
    from checklayer import LayerType, detect_layers  # noqa: E402
    from checklayer.context import CheckLayerTestContext  # noqa: E402

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logger = logging.getLogger("check-layer-offline")
    layers = detect_layers([layer_dir], True)
    if len(layers) != 1 or layers[0]["type"] in (LayerType.ERROR_NO_LAYER_CONF, LayerType.ERROR_BSP_DISTRO):
        print("FAIL: %s is not one valid layer" % layer_dir)
        return 1
    tests = TESTS
    if os.environ.get("CHECK_LAYER_PARSED") == "no":
        # The caller's bitbake -p failed: the parse and environment checks would only parse
        # everything again to fail the same way. The caller reports that failure.
        tests = [t for t in TESTS if not t.endswith(("test_parse", "test_show_environment"))]
    td = {"builddir": os.environ["BUILDDIR"], "machines": None}
    tc = CheckLayerTestContext(td=td, logger=logger, layer=layers[0])
    tc.loadTests([os.path.join(scripts, "lib", "checklayer", "cases")], tests=tests)
    result = tc.runTests()
    return 0 if result.wasSuccessful() and result.testsRun == len(tests) else 1


if __name__ == "__main__":
    sys.exit(main())
