#!/bin/sh
# End to end with real processes: the demo (tools/demo.sh) run as a test. A real pccl-master and
# 3 peer processes train with all-reduced gradients; one is SIGKILLed mid-run and a new one joins;
# the test passes only if every surviving peer ends with bit-identical parameters.
set -u
ws=$TEST_SRCDIR/$TEST_WORKSPACE
export DEMO_PEER="$ws/examples/c/train_logreg" DEMO_MASTER="$ws/ccoip/master/pccl-master"
export DEMO_STEPS=100 DEMO_STEP_DELAY_MS=20
exec timeout 200 sh "$ws/tools/demo.sh"
