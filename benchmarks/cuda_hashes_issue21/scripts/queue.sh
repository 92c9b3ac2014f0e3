#!/bin/bash
T="tests/test_lit.py tests/test_kernels_compile.py tests/test_cli.py"
run() { /tmp/h21/side.sh "$1" "$2" $T; }
run 0021c9a 0021c9a
run 9298ec6_parent 54838b0; run 9298ec6 9298ec6
run 9531423_parent b3e43fb; run 9531423 9531423
run 38fdea0_parent 5607244; run 38fdea0 38fdea0
run b3e608c_parent b6ffef0; run b3e608c b3e608c
run d82a39b_parent a96e924; run d82a39b d82a39b
run 7f1de49_parent 584df79; run 7f1de49 7f1de49; run 3c040a1 3c040a1
echo QUEUE1 DONE
