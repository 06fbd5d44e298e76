//! How deeply a kernel's source nests, bounded before anything recursive runs on it.
//!
//! syn's parser, its printer, this crate's parsing and lowering, and the drop of a syntax tree
//! recurse once per level of an expression: a sum of `n` terms is a tree `n` levels deep. The
//! expansion runs on a stack of its own sized from the nesting ([`on_stack`]), and a statement
//! that nests past [`MAX_NESTING`] is an error on its tokens instead of a crash of the
//! compiler.
//!
//! The nesting is measured on the tokens alone, without recursion: a statement's nesting is its
//! number of tokens (between two `;` in one delimited group) plus the largest nesting of a
//! group inside it. Every level of a syntax tree consumes at least one token, and statements
//! separated by `;` are siblings, so it bounds the depth of any tree parsed from the tokens.

use proc_macro2::{
    Delimiter, Group, Spacing, Span as TokenSpan, TokenStream, TokenTree, token_stream,
};

use crate::errors::Errors;
use crate::span::Span;

/// The most a statement may nest, counting every token: a sum of about 30,000 terms.
pub const MAX_NESTING: usize = 1 << 16;

/// The most a statement may nest without counting the operands of `+ - * / % & | ^` chains
/// separately ([`Nesting::heavy`]): parentheses, unary operators, calls, indices and fields
/// nested within one operand.
pub const MAX_HEAVY: usize = 1 << 12;

/// Stack bytes per level of [`Nesting::all`]: dropping and printing a syntax tree (about 130
/// bytes a level measured in syn's drop), with a margin.
const STACK_PER_LEVEL: usize = 1 << 10;

/// Stack bytes per level of [`Nesting::heavy`]: parsing and lowering an operand (12 to 16 KiB
/// a level measured with this crate unoptimized and syn optimized), with a margin for an
/// unoptimized syn.
const STACK_PER_HEAVY_LEVEL: usize = 64 << 10;

/// The stack every expansion gets, whatever its nesting.
const MIN_STACK: usize = 16 << 20;

/// How deeply source nests: bounds on the depth of any syntax tree parsed from it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Nesting {
    /// Every token counted: bounds the depth of the tree (what a recursive drop, clone or
    /// print costs).
    pub all: usize,
    /// The operands of arithmetic chains counted as siblings: bounds the recursion of syn's
    /// parser and of this crate's parsing and lowering, which walk such chains in a loop.
    pub heavy: usize,
}

impl Nesting {
    /// Whether the source may be expanded.
    pub fn fits(self) -> bool {
        self.all <= MAX_NESTING && self.heavy <= MAX_HEAVY
    }

    /// The larger of two bounds.
    pub fn max(self, other: Nesting) -> Nesting {
        Nesting {
            all: self.all.max(other.all),
            heavy: self.heavy.max(other.heavy),
        }
    }
}

/// Runs `f` on a stack large enough for source that nests as `nesting` says (within the
/// bounds). The stack is the same thread's, so the compiler's proc-macro bridge, which is
/// thread-local, still serves the spans.
pub fn on_stack<R>(nesting: Nesting, f: impl FnOnce() -> R) -> R {
    let all = nesting.all.min(MAX_NESTING).saturating_mul(STACK_PER_LEVEL);
    let heavy = nesting
        .heavy
        .min(MAX_HEAVY)
        .saturating_mul(STACK_PER_HEAVY_LEVEL);
    stacker::grow(MIN_STACK.saturating_add(all).saturating_add(heavy), f)
}

/// The nesting of `tokens`; each innermost statement that nests past the bounds is reported
/// on its tokens (one error each).
pub fn check(tokens: &TokenStream, errors: &mut Errors) -> Nesting {
    measure(tokens, Some(errors))
}

/// The nesting of `tokens`, reporting nothing.
pub fn nesting(tokens: &TokenStream) -> Nesting {
    measure(tokens, None)
}

/// `item` (a function) with an empty body: its signature, for the fallback item after its
/// body was found too deep.
pub fn hollow(item: &TokenStream) -> TokenStream {
    let mut trees: Vec<TokenTree> = item.clone().into_iter().collect();
    let body = trees
        .iter()
        .rposition(|t| matches!(t, TokenTree::Group(g) if g.delimiter() == Delimiter::Brace));
    if let Some(i) = body {
        let span = trees[i].span();
        let mut empty = Group::new(Delimiter::Brace, TokenStream::new());
        empty.set_span(span);
        trees[i] = TokenTree::Group(empty);
    }
    trees.into_iter().collect()
}

/// The tokens between two `;` of one group seen so far.
#[derive(Default)]
struct Statement {
    tokens: usize,
    /// The largest nesting of a group in it.
    inner: Nesting,
    /// The tokens of the current operand of an arithmetic chain, and the largest heavy
    /// nesting of a group in it.
    operand: usize,
    operand_inner: usize,
    /// The largest heavy nesting of the operands before it.
    operands: usize,
    /// Whether the last token ends an operand (so that a `-` after it is binary).
    after_operand: bool,
    first: Option<TokenSpan>,
    last: Option<TokenSpan>,
    /// Whether a statement inside it was reported (it is not, then: one error per mistake).
    reported: bool,
}

impl Statement {
    fn end_operand(&mut self) {
        let heavy = self.operand.saturating_add(self.operand_inner);
        self.operands = self.operands.max(heavy);
        self.operand = 0;
        self.operand_inner = 0;
    }
}

/// A delimited group being measured.
struct Level {
    tokens: token_stream::IntoIter,
    statement: Statement,
    /// The largest nesting of its statements so far.
    nesting: Nesting,
    reported: bool,
}

impl Level {
    fn new(tokens: TokenStream) -> Level {
        Level {
            tokens: tokens.into_iter(),
            statement: Statement::default(),
            nesting: Nesting::default(),
            reported: false,
        }
    }

    /// A token of the statement; `operand_end` whether it ends an operand.
    fn token(&mut self, first: TokenSpan, last: TokenSpan, operand_end: bool) {
        let s = &mut self.statement;
        s.tokens = s.tokens.saturating_add(1);
        s.operand = s.operand.saturating_add(1);
        s.after_operand = operand_end;
        s.first.get_or_insert(first);
        s.last = Some(last);
    }

    /// A binary arithmetic operator: it ends an operand.
    fn operator(&mut self, span: TokenSpan) {
        let s = &mut self.statement;
        s.tokens = s.tokens.saturating_add(1);
        s.after_operand = false;
        s.first.get_or_insert(span);
        s.last = Some(span);
        s.end_operand();
    }

    fn end_statement(&mut self, errors: &mut Option<&mut Errors>) {
        let mut s = std::mem::take(&mut self.statement);
        s.end_operand();
        let nesting = Nesting {
            all: s.tokens.saturating_add(s.inner.all),
            heavy: s.operands,
        };
        let mut reported = s.reported;
        if !nesting.fits()
            && !reported
            && let (Some(first), Some(last), Some(errors)) = (s.first, s.last, errors.as_mut())
        {
            errors.push(
                Span { start: first, end: last },
                format!(
                    "this statement is too long or nests too deeply for `#[kernel]` ({} tokens deep, at most {MAX_NESTING}; {} within one operand, at most {MAX_HEAVY}): split it into shorter statements bound with `let`",
                    nesting.all, nesting.heavy
                ),
            );
            reported = true;
        }
        self.nesting = self.nesting.max(nesting);
        self.reported |= reported;
    }
}

/// Whether `c` may be a binary arithmetic operator, whose operands are walked in a loop.
fn arithmetic(c: char) -> bool {
    matches!(c, '+' | '-' | '*' | '/' | '%' | '&' | '|' | '^')
}

/// The nesting of `tokens`, walked with a stack of its own (groups may nest arbitrarily).
fn measure(tokens: &TokenStream, mut errors: Option<&mut Errors>) -> Nesting {
    let mut levels = vec![Level::new(tokens.clone())];
    loop {
        let Some(top) = levels.last_mut() else {
            return Nesting::default();
        };
        match top.tokens.next() {
            Some(TokenTree::Group(g)) => {
                top.token(g.span_open(), g.span_close(), true);
                levels.push(Level::new(g.stream()));
            }
            Some(TokenTree::Punct(p)) if p.as_char() == ';' => {
                top.statement.tokens = top.statement.tokens.saturating_add(1);
                top.end_statement(&mut errors);
            }
            // `a + b`, not `+=`, `&&` or `->`: a binary operator of a chain.
            Some(TokenTree::Punct(p))
                if top.statement.after_operand
                    && arithmetic(p.as_char())
                    && p.spacing() == Spacing::Alone =>
            {
                top.operator(p.span());
            }
            Some(t @ (TokenTree::Ident(_) | TokenTree::Literal(_))) => {
                top.token(t.span(), t.span(), true)
            }
            Some(t) => top.token(t.span(), t.span(), false),
            None => {
                top.end_statement(&mut errors);
                let Some(done) = levels.pop() else {
                    return Nesting::default();
                };
                let Some(parent) = levels.last_mut() else {
                    return done.nesting;
                };
                let s = &mut parent.statement;
                s.inner = s.inner.max(done.nesting);
                s.operand_inner = s.operand_inner.max(done.nesting.heavy);
                s.reported |= done.reported;
            }
        }
    }
}
