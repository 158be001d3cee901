#!/bin/sh
# A browser that dies at its first start in an attempt (as Chromium rarely does under load,
# with nothing on its output) and starts normally the second time. The marker lives in the
# attempt's working directory, so every attempt sees one failure.
if [ ! -e ./first-start-failed ]; then
	: > ./first-start-failed
	exit 1
fi
exec /usr/lib/chromium/chromium "$@"
