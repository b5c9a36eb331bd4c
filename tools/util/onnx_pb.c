/*
 * onnx_pb.c — the protobuf-c code generated from ONNX's onnx.proto (build/gen/onnx.pb-c.c),
 * compiled into the tools' helper library. The tools link only libipuof-client and
 * tools/util, not sim, so they carry their own copy; a tool that does not read or write
 * TensorProto files does not pull it in from the static library.
 */
#include "onnx.pb-c.c"
