package inspect

// WriteHTML is the page Handler serves for ?format=html, for tests that render a given Dump.
var WriteHTML = writeHTML
