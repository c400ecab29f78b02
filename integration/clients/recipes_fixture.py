#!/usr/bin/env python3
"""Source data for the docs/clients.md recipes (driven by integration/clients_recipes_test.go).

  recipes_fixture.py TREE EXPECT

writes TREE/rasters/depth.tif (a 64x64 uint8 GeoTIFF) and TREE/tides.zarr (an
xarray Dataset with a float64 "height" variable, consolidated metadata), and
the bytes each recipe must reproduce from them: EXPECT/depth.raw (the band's
pixels) and EXPECT/tides.raw (height as little-endian float64). The values
are a deterministic function of the indices.
"""
import os
import sys

import numpy as np
import rasterio
import xarray as xr
from rasterio.transform import from_origin


def main(tree, expect):
    os.makedirs(os.path.join(tree, "rasters"), exist_ok=True)
    os.makedirs(expect, exist_ok=True)
    y, x = np.meshgrid(np.arange(64), np.arange(64), indexing="ij")
    depth = ((y * 7 + x * 3) % 251).astype("uint8")
    profile = dict(driver="GTiff", width=64, height=64, count=1, dtype="uint8",
                   crs="EPSG:4326", transform=from_origin(5.0, 53.0, 0.01, 0.01))
    with rasterio.open(os.path.join(tree, "rasters", "depth.tif"), "w", **profile) as dst:
        dst.write(depth, 1)
    with open(os.path.join(expect, "depth.raw"), "wb") as f:
        f.write(depth.tobytes())

    t, s = np.meshgrid(np.arange(48), np.arange(5), indexing="ij")
    height = (np.sin(t / 3.0) * 1.5 + s * 0.25).astype("float64")
    ds = xr.Dataset({"height": (("time", "station"), height, {"units": "m"})},
                    coords={"time": np.arange(48), "station": np.arange(5)})
    ds.to_zarr(os.path.join(tree, "tides.zarr"), mode="w", consolidated=True,
               encoding={"height": {"chunks": (12, 5)}})
    with open(os.path.join(expect, "tides.raw"), "wb") as f:
        f.write(height.astype("<f8").tobytes())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
