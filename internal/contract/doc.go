// Package contract holds black-box tests that check loom's packages against the letter of DESIGN.md.
package contract
