// Just enough protobuf to read OTLP export requests without the .proto files or a library: the
// top-level fields of one message, and lookups by field number. Used by the benchmark's OTLP sink,
// the hostile run and the tests' OTLP receiver (test/support/otlp-receiver.ts), so that all three
// read spans the same way. Types: otlp-protobuf.d.mts.

function varint(buf, at) {
  let value = 0n;
  for (let shift = 0n; ; shift += 7n) {
    const byte = buf[at++];
    if (byte === undefined) throw new Error('truncated protobuf varint');
    value |= BigInt(byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) return [value, at];
  }
}

/**
 * The top-level fields of one protobuf message, in order: varints (wire type 0) as bigint,
 * length-delimited fields (wire type 2) as views of their bytes. Fixed-width fields (wire types 1
 * and 5: timestamps, doubles, span flags) are skipped; other wire types throw.
 */
export function fields(message) {
  const out = [];
  let at = 0;
  while (at < message.length) {
    let key;
    [key, at] = varint(message, at);
    const number = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (wire === 0) {
      let value;
      [value, at] = varint(message, at);
      out.push({ number, varint: value });
    } else if (wire === 2) {
      let length;
      [length, at] = varint(message, at);
      const end = at + Number(length);
      if (end > message.length) throw new Error('truncated protobuf field');
      out.push({ number, bytes: message.subarray(at, end) });
      at = end;
    } else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else throw new Error(`unsupported protobuf wire type ${wire}`);
  }
  return out;
}

export function messages(message, number) {
  return fields(message).flatMap((field) => (field.number === number && 'bytes' in field ? [field.bytes] : []));
}

/** The first length-delimited field numbered `number`, or no bytes (protobuf's default). */
export function bytesOf(message, number) {
  return messages(message, number)[0] ?? Buffer.alloc(0);
}

/** The first varint field numbered `number`, or 0n (protobuf's default). */
export function varintOf(message, number) {
  for (const field of fields(message)) if (field.number === number && 'varint' in field) return field.varint;
  return 0n;
}
