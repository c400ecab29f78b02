#!/usr/bin/env python3
"""Zarr/xarray client for wharf's integration tests (driven by integration/python_test.go).

  zarr_client.py create DIR              write DIR/store.zarr (xarray Dataset + a sparse zarr array)
  zarr_client.py http URL                open URL/store.zarr anonymously with fsspec's HTTP mapper
  zarr_client.py boto3 ENDPOINT BUCKET   open BUCKET/store.zarr through boto3 (keys from env)

Every mode prints a JSON report. The data are a deterministic function of the
indices, so the readers recompute what was written and compare every value.
"""
import json
import os
import sys
from collections.abc import MutableMapping

import numpy as np
import xarray as xr
import zarr

NY, NX = 60, 80
NCOUNTS = 100
WRITTEN = slice(0, 45)  # counts[45:] is never written: its chunks do not exist


def expected_temperature():
    y, x = np.meshgrid(np.arange(NY), np.arange(NX), indexing="ij")
    return (np.sin(y / 7.0) * 20.0 + np.cos(x / 11.0) * 5.0 + y * 0.25 - x * 0.125).astype("float64")


def expected_counts():
    c = np.full(NCOUNTS, -1, dtype="int32")
    c[WRITTEN] = np.arange(45, dtype="int32") * 3 + 7
    return c


ATTRS = {"title": "wharf zarr test", "institution": "harbour", "answer": 42}


def create(d):
    path = os.path.join(d, "store.zarr")
    ds = xr.Dataset(
        {"temperature": (("y", "x"), expected_temperature(), {"units": "degC"})},
        coords={"y": np.arange(NY) * 0.5, "x": np.arange(NX) * 0.25},
        attrs=ATTRS,
    )
    ds.to_zarr(path, mode="w", encoding={"temperature": {"chunks": (16, 16)}}, consolidated=True)
    g = zarr.open_group(path, mode="a")
    counts = g.create_dataset("counts", shape=(NCOUNTS,), chunks=(10,), dtype="int32", fill_value=-1)
    counts.attrs["_ARRAY_DIMENSIONS"] = ["n"]
    counts[WRITTEN] = expected_counts()[WRITTEN]
    zarr.consolidate_metadata(path)
    files = sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(path) for f in fs)
    return {"files": files, "temperature_sum": float(expected_temperature().sum())}


def check(store):
    ds = xr.open_zarr(store, consolidated=True)
    t = ds["temperature"].values
    report = {
        "shape": list(t.shape),
        "temperature_sum": float(t.sum()),
        "temperature_equal": bool(np.array_equal(t, expected_temperature())),
        "attrs_equal": {k: ds.attrs.get(k) for k in ATTRS} == ATTRS,
        "units": ds["temperature"].attrs.get("units"),
        "coords_equal": bool(np.array_equal(ds["x"].values, np.arange(NX) * 0.25) and np.array_equal(ds["y"].values, np.arange(NY) * 0.5)),
    }
    # A window that crosses chunk boundaries.
    w = ds["temperature"].isel(y=slice(10, 37), x=slice(5, 50)).values
    report["window_equal"] = bool(np.array_equal(w, expected_temperature()[10:37, 5:50]))
    g = zarr.open_group(store, mode="r")
    c = g["counts"][:]
    report["counts_equal"] = bool(np.array_equal(c, expected_counts()))
    report["ok"] = all(report[k] for k in ("temperature_equal", "attrs_equal", "coords_equal", "window_equal", "counts_equal")) and report["units"] == "degC"
    return report


class Boto3Store(MutableMapping):
    """A read-only zarr v2 store over boto3 (keys missing on the server are KeyError)."""

    def __init__(self, s3, bucket, prefix):
        self.s3, self.bucket, self.prefix = s3, bucket, prefix.rstrip("/") + "/"
        self.gets = 0

    def __getitem__(self, key):
        import botocore
        try:
            self.gets += 1
            return self.s3.get_object(Bucket=self.bucket, Key=self.prefix + key)["Body"].read()
        except botocore.exceptions.ClientError as e:
            if e.response["Error"]["Code"] in ("NoSuchKey", "404"):
                raise KeyError(key)
            raise

    def __iter__(self):
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix):
            for o in page.get("Contents", []):
                yield o["Key"][len(self.prefix):]

    def __len__(self):
        return sum(1 for _ in self)

    def __contains__(self, key):
        try:
            self[key]
            return True
        except KeyError:
            return False

    def __setitem__(self, key, value):
        raise PermissionError("read-only")

    def __delitem__(self, key):
        raise PermissionError("read-only")


def main():
    mode = sys.argv[1]
    if mode == "create":
        out = create(sys.argv[2])
    elif mode == "http":
        import fsspec
        out = check(fsspec.get_mapper(sys.argv[2].rstrip("/") + "/store.zarr"))
        out["via"] = "fsspec http, anonymous"
    elif mode == "boto3":
        import boto3
        from botocore.config import Config
        s3 = boto3.client("s3", endpoint_url=sys.argv[2], region_name="us-east-1",
                          config=Config(retries={"total_max_attempts": 1}))
        store = Boto3Store(s3, sys.argv[3], "store.zarr")
        out = check(store)
        out["keys"] = sorted(store)
        out["via"] = "boto3 MutableMapping, SigV4"
    else:
        raise SystemExit("unknown mode " + mode)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
