#!/bin/bash
while ! grep -q "QUEUE1 DONE" /tmp/h21/queue.log; do sleep 5; done
run() { /tmp/h21/side.sh "$1" "$2"; }   # examples only (no pytest)
run 2347ec1_parent 2d6b942; run 2347ec1 2347ec1
run 0a5a29b_parent 6e35bdf; run 0a5a29b 0a5a29b
run d04b8c0_parent e0a5b8c; run d04b8c0 d04b8c0
echo QUEUE2 DONE
