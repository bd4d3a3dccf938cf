#!/bin/sh
# Register the namespace the worker uses, once.
set -eu
ns="${DEFAULT_NAMESPACE:-default}"
until temporal operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; do
  echo "waiting for temporal at $TEMPORAL_ADDRESS"; sleep 1
done
temporal operator namespace describe --address "$TEMPORAL_ADDRESS" -n "$ns" >/dev/null 2>&1 \
  || temporal operator namespace create --address "$TEMPORAL_ADDRESS" -n "$ns" --retention 72h
echo "namespace $ns ready"
