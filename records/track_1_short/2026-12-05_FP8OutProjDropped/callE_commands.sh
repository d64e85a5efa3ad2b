# Session 62, call E (call D's machine, warm): call C's census for the branch's second version (oproj2.py) and main
sed -e 's/for version in oproj main_s62; do/for version in oproj2 main_s62; do/g' -e 's/timeout 260/timeout 150/' perf/base/s62_callC.sh > /tmp/e.sh && bash /tmp/e.sh
