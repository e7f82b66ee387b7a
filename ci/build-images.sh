#!/bin/sh
echo "images: not yet"
