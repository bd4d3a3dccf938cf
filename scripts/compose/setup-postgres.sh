#!/bin/sh
# Create (first run) or upgrade (later runs) Temporal's two PostgreSQL schemas.
# `create` and `setup-schema -v 0.0` fail harmlessly when already done; `update-schema` must pass.
set -eu
tool() { temporal-sql-tool --plugin postgres12 --ep postgresql -p 5432 -u temporal --pw temporal "$@"; }
until nc -z postgresql 5432; do echo "waiting for postgresql"; sleep 1; done
for db in temporal temporal_visibility; do
  dir=temporal
  [ "$db" = temporal_visibility ] && dir=visibility
  tool --db "$db" create || true
  tool --db "$db" setup-schema -v 0.0 || true
  tool --db "$db" update-schema -d "/etc/temporal/schema/postgresql/v12/$dir/versioned"
done
echo "schemas ready"
