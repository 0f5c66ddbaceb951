package h1

// ReadSimple and BufSize are for the tests of package h1_test.
var ReadSimple = readSimple

const BufSize = bufSize
