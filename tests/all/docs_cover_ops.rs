//! `docs/language.md` names every instruction, ALU operation and activation function of the
//! op table: a new row in `nki-lang` without a word in the language reference fails here.

use nki::program::{ActFn, Alu, Opcode};

fn language_md() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/language.md");
    std::fs::read_to_string(path).expect("docs/language.md")
}

/// Whether the page writes `name` as code: `` `name` ``, `` `name(…` `` or `` `nl.name` ``.
fn mentions(doc: &str, name: &str) -> bool {
    [format!("`{name}`"), format!("`{name}("), format!("{name}(")]
        .iter()
        .any(|form| doc.contains(form.as_str()))
        || doc.contains(&format!(", `{name}`"))
        || doc.contains(&format!("`{name},"))
}

#[test]
fn every_opcode_is_documented() {
    let doc = language_md();
    let missing: Vec<&str> = Opcode::ALL
        .iter()
        .filter(|op| !matches!(op, Opcode::LoopBegin | Opcode::LoopEnd))
        .map(|op| op.info().name)
        .filter(|name| !mentions(&doc, name))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/language.md does not name the instructions {missing:?}"
    );
    // The loops are the language's `affine_range` and `sequential_range`.
    assert!(mentions(&doc, "affine_range") && mentions(&doc, "sequential_range"));
}

#[test]
fn every_alu_operation_and_activation_is_documented() {
    let doc = language_md();
    let alu = Alu::ALL.iter().map(|a| a.name());
    let act = ActFn::ALL.iter().map(|f| f.name());
    let missing: Vec<&str> = alu
        .chain(act)
        .filter(|name| !mentions(&doc, name))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/language.md does not name {missing:?}"
    );
}
